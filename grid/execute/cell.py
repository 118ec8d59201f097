"""One cell, top to bottom, on a running server and its group's load generators: flush, barrier,
sampling and telemetry, the shared start, the end of the cell, its rows (docs/architecture.md,
"One cell"). Everything the cell needs was decided by the plan (`PlannedCell`,
grid/plan/work.py). Every wait is a step of the group's work (grid/execute/steps.py) with a
bound: the load's is its progress (grid/execute/stall.py), every other call's
`run.call_timeout_s`. A call past its bound fails this cell, naming the call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray

from actors.loadgen.actor import START_MARGIN_S
from grid.execute.server import CellEnd, Server, first_line
from grid.execute.stall import StallWatch
from grid.execute.steps import Steps, call
from grid.plan.work import PlannedCell
from grid.store import rows
from grid.store.rows import CellOutcome


class LoadGenLost(RuntimeError):
    """A load generator's actor died (or its node) while it drove a cell."""


@dataclass(frozen=True)
class CellSettings:
    """The run's settings every cell is run with."""

    run_id: str
    max_error_rate: float
    """run.max_error_rate: a cell whose request error ratio exceeds it fails."""
    call_timeout_s: float
    """run.call_timeout_s: the bound of every actor call but the load's."""
    metrics_interval_s: float | None
    """run.metrics_interval_s (None: no /metrics sampling)."""


def measure(settings: CellSettings, work: PlannedCell, attempt: int, started: float,
            server: Server, loadgens: list[Any], telemetry: Any,
            on_counts: Callable[[dict[str, int]], None] | None = None
            ) -> Steps[tuple[CellOutcome, CellEnd]]:
    """Run the cell; its outcome (done, or failed on its error rate or its server's death)
    and what the server said at its end. Raises on anything else (the caller fails the
    cell)."""
    bound = settings.call_timeout_s
    yield from server.flush_cache(bound)
    watch = StallWatch.of(loadgens, work.bounds, started)
    # Barrier (actors/loadgen/actor.py): every client connected and warmed up, then one shared
    # start a moment ahead, so the clients' schedules line up and no client measures while
    # another still warms up.
    refs = [lg.prepare.remote(spec)
            for lg, spec in zip(loadgens, work.at(server.url, server.api_key), strict=True)]
    yield from watch.wait(refs)
    collect(refs)
    yield from server.start_metrics(settings.metrics_interval_s, bound)
    if telemetry is not None:
        yield from call(telemetry.start.remote(), "the telemetry's start", bound)
    watch.window_opens()
    start_at = time.time() + START_MARGIN_S
    refs = [lg.run.remote(start_at) for lg in loadgens]
    yield from watch.wait(refs, on_counts)
    results = collect(refs)
    end = yield from server.end_cell(bound)
    gpu_rows = [] if telemetry is None else \
        (yield from call(telemetry.stop.remote(), "the telemetry's stop", bound))
    outcome = rows.measured(
        settings.run_id, work, attempt, started=started, finished=time.time(),
        results=results, samples=end.samples, server=server.facts(end),
        server_death=end.death, log_tail=end.log_tail if end.death else None,
        telemetry=gpu_rows, max_error_rate=settings.max_error_rate)
    return outcome, end


def collect(refs: list[Any]) -> list[Any]:
    """The clients' results once all have finished (their wait returned, so none is left
    driving load into the next cell); LoadGenLost if one's actor died."""
    results, lost = [], []
    for ref in refs:
        try:
            results.append(ray.get(ref, timeout=0))  # ready: no wait
        except ray.exceptions.RayActorError as e:
            lost.append(first_line(e))
    if lost:
        raise LoadGenLost(f"load generator died: {lost[0]}")
    return results
