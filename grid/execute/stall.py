"""A running cell's bound: its progress, not a model of how long it should take. The stall
bound (`load.request_timeout_s` + the longest wait of the cell's own schedule +
STALL_MARGIN_S), the overall cap `run.cell_timeout_s`, the cancel and the line a LoadTimeout
states: docs/runs.md. Polls never block the controller: each is a Ray call whose answer is read
at a later poll (grid/execute/controller.py drives many groups from one loop)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray

from grid.execute.steps import Steps, Wait, WaitTimeout, answers
from grid.plan.work import Bounds

PROGRESS_INTERVAL_S = 1.0
"""How often the load generators are asked for the running cell's counts."""
PING_TIMEOUT_S = 10.0
"""How long an actor may take to answer a ping or a progress poll."""
CANCEL_TIMEOUT_S = 10.0
"""How long a stalled cell's clients may take to confirm they cancelled its load (their own
grace for the cancelled tasks, actors/loadgen/actor.py CANCEL_GRACE_S = 5 s, and the call)."""
STALL_MARGIN_S = 30.0
"""What a stall bound allows beyond a request's timeout and the schedule's waits: a poll's
answer read up to PING_TIMEOUT_S (10 s) late, the clients' pre-connection between warm-up and
window (LoadSpec.connect_timeout_s, 10 s) and their own work with nothing in flight (the start
barrier, START_MARGIN_S = 0.5 s, and building the rows at the end: seconds)."""


class LoadTimeout(RuntimeError):
    """A cell's load made no progress for its stall bound, or passed run.cell_timeout_s."""

    stuck: tuple[int, ...] = ()
    """The clients (by index) that did not confirm the load's cancellation in time."""
    at_s: float | None = None
    """When the bound passed, in seconds into the cell (its time before the load included)."""

    def recorded(self, cell_s: float) -> str:
        """The rest of a cell that ended `cell_s` seconds in, named: its failure and what
        followed it (the clients cancel the load, the server's end of the cell)."""
        if self.at_s is None:
            return ""
        return (f"; failed {self.at_s:.1f} s into the cell, recorded {cell_s - self.at_s:.1f} s "
                "later (the load cancelled, the server's end of the cell)")


def stall_bound_s(request_timeout_s: float, longest_wait_s: float) -> float:
    """load.request_timeout_s + the longest wait of the cell's schedule + STALL_MARGIN_S (see
    the module doc for why)."""
    return request_timeout_s + longest_wait_s + STALL_MARGIN_S


@dataclass
class Stall:
    """The bounds of one cell's load, fed with its clients' answers (pure: the clock is passed
    in). `request_timeout_s` and `longest_wait_s` make the stall bound; `cap_s` is
    run.cell_timeout_s."""

    request_timeout_s: float
    longest_wait_s: float
    cap_s: float | None
    started: float
    before_s: float = 0.0
    """Seconds of the cell before its load was watched: the server's start (a group's first
    cell, or after a broken server), the load generators', the cache flush. Not bounded here
    (a server's start has its own bound); named in the LoadTimeout, so that the cell's time
    adds up from the parts it states."""
    last_progress: float = field(init=False)
    best: dict[int, int] = field(default_factory=dict)
    """The highest activity each client has reported (each cell starts at 0)."""

    def __post_init__(self) -> None:
        self.last_progress = self.started

    @property
    def stall_s(self) -> float:
        return stall_bound_s(self.request_timeout_s, self.longest_wait_s)

    def seen(self, client: int, activity: int, now: float) -> None:
        """Client `client` reported `activity` (its chunks and completions so far) at `now`:
        progress when it grew."""
        if activity > self.best.get(client, 0):
            self.best[client] = activity
            self.last_progress = now

    def progressed(self, now: float) -> None:
        """Progress the driver saw itself (every client finished its warm-up)."""
        self.last_progress = max(self.last_progress, now)

    def deadline(self) -> float:
        """When the cell fails if nothing progresses before."""
        stalled = self.last_progress + self.stall_s
        return stalled if self.cap_s is None else min(stalled, self.started + self.cap_s)

    def check(self, now: float) -> None:
        """LoadTimeout (one line, with the bound, where it comes from and when in the cell it
        was counted from) once a bound passed."""
        error = None
        if self.cap_s is not None and now - self.started >= self.cap_s:
            error = LoadTimeout(f"the load ran past run.cell_timeout_s={self.cap_s:g} s, "
                                f"counted from {self.before_s:.1f} s into the cell")
        elif now - self.last_progress >= self.stall_s:
            last = self.before_s + self.last_progress - self.started
            error = LoadTimeout(
                f"the load made no progress for {self.stall_s:.0f} s (no token streamed, no "
                f"request completed) from {last:.1f} s into the cell: bound = "
                f"load.request_timeout_s {self.request_timeout_s:g} s + longest scheduled wait "
                f"{self.longest_wait_s:g} s + stall margin {STALL_MARGIN_S:g} s")
        if error is not None:
            error.at_s = self.before_s + now - self.started
            raise error


class StallWatch:
    """A `Stall` fed by polling a cell's load generators (Ray actors with `progress()`): the
    one place that waits for a cell's load."""

    def __init__(self, clients: Sequence[Any], stall: Stall,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clients = list(clients)
        self.stall = stall
        self.clock = clock
        self._pending: dict[int, tuple[Any, float]] = {}
        self._counts: dict[int, Mapping[str, int]] = {}

    @classmethod
    def of(cls, clients: Sequence[Any], bounds: Bounds, cell_started: float) -> StallWatch:
        """The watch of a cell's load (its planned `bounds`), starting now, in a cell that
        started at `cell_started` (epoch seconds)."""
        return cls(clients, Stall(bounds.request_timeout_s, bounds.longest_wait_s,
                                  bounds.cap_s, started=time.monotonic(),
                                  before_s=max(0.0, time.time() - cell_started)))

    def wait(self, refs: list[Any],
             on_counts: Callable[[dict[str, int]], None] | None = None) -> Steps[None]:
        """Wait for the clients' calls `refs` (their prepare, or their load), polling their
        progress every PROGRESS_INTERVAL_S (summed counts to `on_counts`, a live display);
        once a bound passes, the clients cancel the load and LoadTimeout says which did not."""
        while True:
            try:
                yield Wait(refs, timeout_s=self.wait_s())
                return
            except WaitTimeout:
                counts = self.poll()
                if on_counts is not None and counts is not None:
                    on_counts(counts)
                try:
                    self.check()
                except LoadTimeout as timeout:
                    timeout.stuck = yield from self.cancel()
                    raise

    def cancel(self) -> Steps[tuple[int, ...]]:
        """Every client cancels the cell's load (LoadGenActor.cancel); the clients that did
        not confirm within CANCEL_TIMEOUT_S (or died)."""
        if not self.clients:
            return ()
        got = yield from answers([client.cancel.remote() for client in self.clients],
                                 CANCEL_TIMEOUT_S)
        return tuple(i for i, (ok, _) in enumerate(got) if not ok)

    def wait_s(self) -> float:
        """How long the next wait for the load may last: until the next poll or the bound."""
        return max(0.0, min(PROGRESS_INTERVAL_S, self.stall.deadline() - self.clock()))

    def poll(self) -> dict[str, int] | None:
        """Read the answers of earlier polls that came back, drop those older than
        PING_TIMEOUT_S (no news), ask every client without a poll in flight again; the
        clients' summed display counts (`done`, `tokens`, `errors`) when one answered."""
        now = self.clock()
        answered = False
        for i, (ref, sent) in list(self._pending.items()):
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                if now - sent > PING_TIMEOUT_S:
                    del self._pending[i]  # no news from this client
                continue
            del self._pending[i]
            try:
                counts = ray.get(ref, timeout=0)  # ready: no wait
            except ray.exceptions.RayError:
                continue  # a dead client: its load's own result says why
            if counts is None:  # between two cells, or not yet preparing this one
                continue
            answered = True
            self._counts[i] = counts
            self.stall.seen(i, int(counts.get("activity", 0)), now)
        for i, client in enumerate(self.clients):
            if i not in self._pending:
                self._pending[i] = (client.progress.remote(), now)
        if not answered:
            return None
        return {key: sum(int(c[key]) for c in self._counts.values())
                for key in ("done", "tokens", "errors")}

    def check(self) -> None:
        self.stall.check(self.clock())

    def window_opens(self) -> None:
        """The measured window starts: the clients' warm-up ended (progress), and the driver's
        own work since (starting the metrics and telemetry) was no silence of the load's."""
        self.stall.progressed(self.clock())
