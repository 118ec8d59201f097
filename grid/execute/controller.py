"""The run controller: runs the server groups of a run (grid/execute/group.py), up to
`grid.max_parallel_servers` at once, groups in grid order, with one `ray.wait` over the running
work of all groups (docs/architecture.md, "Server groups"); it throws WaitTimeout into a step
whose bound passed. Only an interruption of the driver (signal, Ctrl-C) or a results folder
that cannot be written stops the run."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from secrets import token_urlsafe

import ray

from grid.execute.cell import CellSettings
from grid.execute.cluster import node_resources
from grid.execute.group import GroupRun, Interrupted
from grid.execute.progress import Progress
from grid.execute.steps import Wait, WaitTimeout
from grid.plan.build import Plan
from grid.plan.cells import Cell, group_by_server
from grid.plan.placement import fits_together
from grid.plan.workloads import workload_records
from grid.store.record import RunRecord

Steps = Generator[Wait, None, None]
__all__ = ["Controller", "Held", "Interrupted"]


@dataclass
class Held:
    """Servers one controller kept running after its `run` (`hold_last`), handed to the next
    controller (`Controller(held=...)`): the run loop of an adaptive search owns it between
    steps (grid/execute/search.py); whoever holds it last calls `release`."""

    run_key: str
    """The run key the held servers were started with (the next controller keeps it)."""
    groups: dict[str, GroupRun] = field(default_factory=dict)
    """Held groups by their key (`ServerGroup.key`: server key and repeat)."""

    def release(self) -> None:
        """Stop the held servers (with their placements and load generators), here and now:
        the run (or its search) is over or interrupted, no group's work runs beside them."""
        groups, self.groups = self.groups, {}
        for run in groups.values():
            run.close()


@dataclass
class Controller:
    plan: Plan
    record: RunRecord
    max_error_rate: float
    metrics_interval_s: float | None
    call_timeout_s: float = 60.0
    """run.call_timeout_s: the bound of every actor call around a cell but its load."""
    echo: Callable[[str], None] = print
    progress: Progress | None = None
    """Live progress (execute/progress.py): cell and server start-up events; None = plain lines."""
    telemetry_interval_s: float | None = None
    """GPU telemetry (NVML) sampled during each cell by one TelemetryActor per group."""
    node_gpus: list[int] = field(default_factory=list)
    """GPUs of each node of the Ray cluster (execute/cluster.py); sizes exclusive placements."""
    run_key: str = field(default_factory=lambda: token_urlsafe(32), repr=False)
    """This run's API key for servers that bind beyond loopback without engine.api_key
    (LaunchSpec.with_run_key); it reaches the ServerActors and LoadGenActors through Ray, in
    their specs, and is never recorded."""
    hold_last: bool = False
    """Keep servers (with their placements and load generators) running after `run` for a
    next `run` that uses the same servers: an adaptive search's next step
    (grid/execute/search.py) extends running servers instead of starting them again. Every
    group of the run is kept when all of them fit on the cluster at once (`fits_together`:
    two servers on an 8-GPU node with grid.exclusive_node=false), else the last one; groups
    a next `run` does not use are stopped before it starts; `release` stops the rest."""
    held: Held | None = None
    """Servers the previous step's controller held (`handover`), taken at construction: their
    groups run on this controller and its plan, under the same run key."""
    total: int = 0
    started: int = 0
    parked: dict[str, GroupRun] = field(default_factory=dict, repr=False)
    """Held groups by their key (`ServerGroup.key`: server key and repeat)."""

    def __post_init__(self) -> None:
        if self.held is not None:
            self.run_key = self.held.run_key
            self.parked, self.held.groups = self.held.groups, {}
            for run in self.parked.values():
                run.run = self  # the group now answers to this controller (and its plan)
            self.held = None

    def handover(self) -> Held:
        """The servers `hold_last` kept, for the next step's controller; this one holds none
        after."""
        parked, self.parked = self.parked, {}
        return Held(self.run_key, parked)

    @property
    def settings(self) -> CellSettings:
        return CellSettings(self.plan.run_id, self.max_error_rate, self.call_timeout_s,
                            self.metrics_interval_s)

    def cell_started(self) -> tuple[int, int]:
        self.started += 1
        return self.started - 1, self.total

    def run(self, cells: Sequence[Cell]) -> None:
        """Run `cells` (the ones still to do), grouped by server and repeat, groups in the
        order `group_by_server` gives (grid order; reversed every other repeat), up to
        `plan.max_parallel_servers` groups at a time."""
        self.total, self.started = len(cells), 0
        if self.plan.workloads is not None:  # the prompts the run sends, with their sources
            self.record.record_workloads(workload_records(self.plan.workloads.sets))
        groups = group_by_server(cells)  # a fresh server per repeat, alternating order
        # Parked servers this run does not use are released as steps beside the new groups'
        # work (their GPUs go to the servers this run starts: a placement waits for them),
        # not counted against max_parallel_servers: none of their cells runs.
        releasing = [self.parked.pop(k) for k in list(self.parked)
                     if k not in {g.key for g in groups}]
        runs: list[GroupRun] = []
        for group in groups:
            parked = self.parked.pop(group.key, None)
            if parked is not None:
                parked.group = group
                runs.append(parked)
            else:
                runs.append(GroupRun(self, group))
        if runs and self.hold_last and self.plan.max_parallel_servers == 1:
            # All of them only where they fit at once: a parked server the cluster has no
            # room beside would block the next group's reservation.
            together = fits_together([r.bundles() for r in runs], node_resources())
            for run in runs if together else runs[-1:]:
                run.hold = True
        waiting = deque(runs)
        active: dict[GroupRun, tuple[Steps, Wait, float | None]] = {}
        try:
            for run in releasing:
                self._advance(active, run, run.release())
            while waiting or active:
                while waiting and len(active.keys() - set(releasing)) < \
                        self.plan.max_parallel_servers:
                    run = waiting.popleft()
                    self._advance(active, run, run.steps())
                if not active:
                    continue
                refs = [ref for _, wait, _ in active.values() for ref in wait.refs]
                if refs:
                    ray.wait(refs, num_returns=1, timeout=1.0)
                else:  # every group pauses (steps.pause)
                    time.sleep(0.1)
                now = time.monotonic()
                for run, (steps, wait, deadline) in list(active.items()):
                    ready, _ = ray.wait(wait.refs, num_returns=len(wait.refs), timeout=0) \
                        if wait.refs else ([], [])
                    if wait.refs and len(ready) == len(wait.refs):
                        self._advance(active, run, steps)
                    elif deadline is not None and now > deadline:
                        # Patient: another group holds what this one needs and will free
                        # it. Only while some group is doing something other than waiting
                        # for resources itself: patient waits alone would wait forever.
                        if wait.patient and any(not w.patient for r, (_, w, _) in
                                                active.items() if r is not run):
                            active[run] = (steps, wait, now + (wait.timeout_s or 0.0))
                        else:
                            self._advance(active, run, steps, WaitTimeout())
        finally:
            # Interrupted, or a results folder that cannot be written: every running group
            # stops its server and load generators (its running cell is marked interrupted),
            # and a release under way finishes, here and now.
            for steps, _, _ in active.values():
                steps.close()

    def release(self) -> None:
        """Stop the servers `hold_last` kept running, if any."""
        self.handover().release()

    def _advance(self, active: dict[GroupRun, tuple[Steps, Wait, float | None]],
                 run: GroupRun, steps: Steps, error: BaseException | None = None) -> None:
        """Resume a group's work until it waits again (or ends)."""
        active.pop(run, None)
        try:
            wait = steps.throw(error) if error is not None else next(steps)
        except StopIteration:
            return
        deadline = None if wait.timeout_s is None else time.monotonic() + wait.timeout_s
        active[run] = (steps, wait, deadline)
