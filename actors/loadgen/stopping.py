"""When a client's measured window stops issuing requests, and why: its count, its time bound
(``duration_s``), a precision target reached (``targets``) or an over-saturated server.

``Watch`` runs beside the load: every ``check_interval_s`` it copies this client's timelines
and, in a worker thread (the bootstrap costs milliseconds to tens of milliseconds, which on the
event loop would delay every stamp behind it; in the thread, numpy's work runs outside the
GIL), evaluates the precision targets (specgrid_metrics/precision.py) once ``min_requests``
have finished, and the over-saturation detector (specgrid_metrics/saturation.py). A check that
took d seconds of CPU delays the next one to at least d / ``CHECK_DUTY``. The rule, and how
several clients of one cell each stop at half_width / sqrt(their share): docs/loadgen.md
("Precision targets and over-saturation")."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np
import scipy.stats  # noqa: F401 - loaded with the load generator, see below
from threadpoolctl import threadpool_limits

from actors.loadgen import schedule
from actors.loadgen.spec import LoadSpec
from actors.loadgen.timeline import Timeline
from specgrid_metrics import precision, saturation
from specgrid_metrics.bootstrap import DEFAULT_REPLICATES, seed_for
from specgrid_metrics.intervals import RequestArrays

CHECK_DUTY = 0.05
"""Share of the wall time the checks may take (see the module doc)."""
# The checks' statistics (specgrid_metrics: scipy.stats) load on first use, to keep the CLI's
# start short; here they load with the load generator instead. Loaded by a window's first
# check, scipy.stats's ~1 s of import held the GIL against the event loop (the serial
# self-check's loop lag 1.18 ms > 1 ms) and counted against CHECK_DUTY (the next check ~20 s
# later: an open loop at twice capacity, over-saturated at 20 s, ran its 1,500 arrivals).

Result = tuple[int, int, Timeline]


@dataclass
class Stop:
    """Asked by the load loops before each request they issue (``due()``)."""

    deadline: float | None = None
    """perf_counter time after which nothing more is issued (duration_s)."""
    reason: str | None = None
    """Set by the watch: ``target`` or ``over_saturated``; by ``Watch.final`` else ``count``
    (no target), ``cap`` (``max_requests`` with a target not met) or ``duration``."""
    detail: str | None = None
    deadline_hit: bool = False

    def due(self) -> bool:
        if self.reason is not None:
            return True
        if self.deadline is not None and perf_counter() >= self.deadline:
            self.deadline_hit = True
            return True
        return False


def arrays(results: Sequence[Result]) -> tuple[RequestArrays, np.ndarray, np.ndarray]:
    """(requests as arrays, each one's scheduled time, each one's tokens streamed so far) from
    timelines. TTFT is known from the first token on; a request counts as finished (finite
    e2e) once it has ended and its outcome is known."""
    n = len(results)
    sent, sched, ttft = np.empty(n), np.empty(n), np.full(n, np.nan)
    e2e, out, ok = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    so_far = np.zeros(n)
    for i, (_, _, tl) in enumerate(results):
        sent[i], sched[i] = tl.sent, tl.scheduled
        times = tl.chunk_times
        if times:
            ttft[i] = times[0] - tl.sent
        end, tokens, error = tl.end, tl.output_tokens, tl.error
        if end is not None and (error is not None or tokens is not None):
            e2e[i] = end - tl.sent
            if error is None:
                ok[i], out[i] = True, float(tokens or 0)
        elif times:
            so_far[i] = sum(tl.chunk_tokens)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(ok & (out > 1), (e2e - ttft) / (out - 1), np.nan)
    return RequestArrays(sent, ttft, tpot, e2e, out, ok), sched, so_far


@dataclass
class Watch:
    """The mid-window checks of one client (see the module doc)."""

    targets: tuple[precision.Target, ...]
    min_requests: int
    closed_loop: bool
    concurrency: int | None
    """This client's streams (closed loop) or in-flight cap (open loop)."""
    share: float
    """This client's share of the cell (1.0 alone)."""
    stop_over_saturated: bool
    interval_s: float
    stop: Stop
    seed: int = 0
    checks: int = 0
    check_cpu_s: float = 0.0
    check_max_s: float = 0.0
    last: precision.Check | None = None
    error: str | None = None
    """Why the checks ended early, if one raised (the window runs on to its count)."""
    seen: saturation.Saturation | None = None
    """The over-saturation that stopped (or marked) the window."""
    schedule: Iterator[float] | None = None
    """Open loop: this client's arrival times (perf_counter), as the dispatcher takes them.
    An arrival waiting for a ``max_in_flight`` slot is not in the timelines yet (the
    dispatcher takes the next arrival only once it has its slot), so a capped loop's backlog
    seen from the timelines alone is its cap, and it was never found over-saturated: the
    checks count the arrivals due by their time from here."""
    _due: list[float] = field(default_factory=list, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)
    _limits: Any = field(default=None, repr=False)
    """BLAS held to one thread while the checks run (set in the worker thread, at its first
    check: finding the BLAS libraries takes milliseconds)."""

    @property
    def active(self) -> bool:
        return bool(self.targets) or self.stop_over_saturated

    def start(self, results: list[Result]) -> None:
        if not self.active:
            return
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loadgen-check")
        self._task = asyncio.get_running_loop().create_task(self._run(results))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._pool is not None:
            if self._limits is not None:
                self._pool.submit(self._limits.restore_original_limits).result()
                self._limits = None
            self._pool.shutdown(wait=True)
            self._pool = None

    async def _run(self, results: list[Result]) -> None:
        loop = asyncio.get_running_loop()
        assert self._pool is not None
        wait = self.interval_s
        while self.stop.reason is None:
            await asyncio.sleep(wait)
            snapshot = list(results)  # one atomic copy; the thread reads the timelines
            try:
                took = await loop.run_in_executor(self._pool, self._evaluate, snapshot,
                                                  perf_counter())
            except Exception as e:  # a check that breaks ends the checks, never the cell
                self.error = f"{type(e).__name__}: {e}"
                return
            wait = max(self.interval_s, took / CHECK_DUTY)

    def _evaluate(self, snapshot: list[Result], now: float) -> float:
        """One check in the worker thread; returns its CPU time."""
        if self._limits is None:  # once, and not counted against the duty (module doc)
            self._limits = threadpool_limits(limits=1, user_api="blas")
        t_wall, t_cpu = perf_counter(), time.thread_time()
        self._decide(snapshot, now)
        cpu = time.thread_time() - t_cpu
        self.checks += 1
        self.check_cpu_s += cpu
        self.check_max_s = max(self.check_max_s, perf_counter() - t_wall)
        return cpu

    def _decide(self, snapshot: list[Result], now: float) -> None:
        req, sched, so_far = arrays(snapshot)
        if self.stop_over_saturated:
            sat = self.saturated(req, sched, now)
            if sat.over_saturated:
                self.seen = sat
                self.stop.detail = f"over-saturated: {sat.reason}"
                self.stop.reason = "over_saturated"
                return
        if not self.targets or int(np.isfinite(req.e2e).sum()) < self.min_requests:
            return
        projected = precision.as_if_stopped(req, so_far, now, self.concurrency,
                                            self.closed_loop)
        if projected is None:
            return
        snapshot_req, win = projected
        result = precision.check(snapshot_req, self.targets, self.concurrency,
                                 self.closed_loop, DEFAULT_REPLICATES, self.seed + self.checks,
                                 window=win, scale=1.0 / math.sqrt(self.share))
        self.last = result
        if result.met:
            self.stop.detail = precision.describe_result(self.targets, result, reached=True)
            self.stop.reason = "target"

    def saturated(self, req: RequestArrays, sched: np.ndarray, now: float
                  ) -> saturation.Saturation:
        tokens = np.where(req.ok, req.output_tokens, 0.0)
        if self.closed_loop:
            return saturation.closed_loop(req.sent, req.ttft, req.end, tokens, now,
                                          int(self.concurrency or 1))
        end = req.end
        waiting = self.waiting(sched.size, now)
        if waiting.size:  # due, not dispatched: waiting for a slot, running for none
            sched = np.concatenate([sched, waiting])
            end = np.concatenate([end, np.full(waiting.size, np.nan)])
            tokens = np.concatenate([tokens, np.zeros(waiting.size)])
        return saturation.open_loop(sched, end, tokens, now)

    def waiting(self, dispatched: int, now: float) -> np.ndarray:
        """The scheduled times of the arrivals due by `now` beyond the first `dispatched`
        (the dispatcher takes them in order)."""
        if self.schedule is not None:
            while not self._due or self._due[-1] <= now:
                nxt = next(self.schedule, None)
                if nxt is None:
                    self.schedule = None
                    break
                self._due.append(nxt)
        due = self._due[dispatched:]
        return np.asarray([t for t in due if t <= now], dtype=float)

    def final(self, results: Sequence[Result], spec: LoadSpec, weights: Sequence[int],
              offset: float) -> dict[str, Any]:
        """Why this client's window stopped, once it has drained: the watch's reason, else
        over-saturation seen over the whole window (checked once more at its last send, now
        that every TTFT is known), else the time bound or the count (``cap`` with a target).
        `offset` turns the evidence's perf_counter times into epoch seconds."""
        stop = self.stop
        planned = (math.inf if spec.num_requests is None else
                   sum(1 for _ in schedule.client_indices(spec.num_requests, weights,
                                                          spec.client_index)))
        issued_all = len(results) >= planned
        duration_set = spec.duration_s is not None
        if stop.reason is None and self.stop_over_saturated and results and self.error is None:
            # by its count or its horizon, the schedule was dispatched whole (and the timelines
            # are in the modelled clock now): nothing waits beyond them
            self.schedule, self._due = None, []
            req, sched, _ = arrays(results)
            try:
                sat = self.saturated(req, sched, float(np.max(req.sent)))
            except Exception as e:  # as in _run: never the cell
                self.error = f"{type(e).__name__}: {e}"
                sat = saturation.Saturation(False, "", "")
            if sat.over_saturated:
                self.seen = sat
                stop.reason = "over_saturated"
                stop.detail = f"over-saturated by the end of its requests: {sat.reason}"
        if stop.reason is None:
            if duration_set and (stop.deadline_hit or not issued_all):
                stop.reason = "duration"
            else:
                stop.reason = "cap" if self.targets else "count"
        return {"stop_reason": stop.reason, "stop_detail": stop.detail,
                "stop_evidence": self.seen.evidence(offset) if self.seen else None,
                "precision_checks": self.checks, "check_cpu_s": self.check_cpu_s,
                "check_max_s": self.check_max_s, "check_error": self.error}


def make_watch(spec: LoadSpec, weights: Sequence[int], stop: Stop) -> Watch:
    """The watch of this client's share of the cell (inactive without targets and without
    the over-saturation stop, or for a client with no share)."""
    mine = weights[spec.client_index]
    share = mine / sum(weights) if mine else 1.0
    return Watch(targets=spec.targets if mine else (),
                 min_requests=math.ceil(spec.min_requests * share),
                 closed_loop=spec.closed_loop, concurrency=spec.my_concurrency, share=share,
                 stop_over_saturated=spec.stop_over_saturated and bool(mine),
                 interval_s=spec.check_interval_s, stop=stop,
                 seed=seed_for(f"precision:{spec.client_index}", spec.seed) % (2 ** 32))
