"""A rough duration of each cell, for the plan's estimate and the progress display's ETA: the
engine's own estimate where it has one (the simulator knows its speed from its model:
engines/sim/estimate.py), else what this run folder or an earlier run beside it measured on the
same server (a real server's speed is unknown until it is measured), else unknown (None, said so
in the plan).

Pure: the measured cells come in as plain values (`Measured`, read from the run folder's
committed cells, and those of earlier runs in the results folder, by
grid/store/measured.py for grid/run.py). Cell durations never bound a cell:
a running cell is bounded by its progress (grid/execute/stall.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import engines
from engines.planning import CellWork, ConversationWork
from grid.plan.cells import Cell

RUN_OVERHEAD_S = 15.0
"""Starting (or joining) Ray and the first actors, measured on the development machine."""
CELL_OVERHEAD_S = 1.5
"""Per cell: cache flush, metric and telemetry start/stop, committing Parquet."""

Source = Literal["engine", "measured", "unknown"]
"""Where a cell's estimate comes from: its engine's model, the measured cells of its server
(this run folder's or an earlier run's), or nowhere."""


@dataclass(frozen=True)
class Measured:
    """A done cell committed in the run folder, as the estimate of its server's cells uses it."""

    server_key: str
    concurrency: int | None
    rate: float | None
    requests: int
    """Its measured requests (a conversation cell's rounds)."""
    seconds: float
    """Its measured load window (the cell row's `duration_s`)."""


def cell_work(cell: Cell, work: ConversationWork | None = None) -> CellWork:
    """The cell's load as plain values, for its engine's estimate."""
    return CellWork(config=cell.config, tp_size=cell.tp_size, num_requests=cell.num_requests,
                    concurrency=cell.concurrency, rate=cell.rate, conversation=work)


def estimate_cell(cell: Cell, work: ConversationWork | None = None,
                  measured: Mapping[str, Measured] | None = None
                  ) -> tuple[float | None, Source]:
    """One cell's wall time and where it comes from: its load (the engine's estimate, else
    `measured_seconds`) plus the per-cell overhead, or (None, "unknown") when neither can
    tell. `work`: a conversation cell's planned work; `measured`: the run folder's done cells
    by cell id."""
    model = engines.modeller(cell.config["engine"]["name"])
    seconds = model.estimate_cell_seconds(cell_work(cell, work)) if model else None
    if seconds is not None:
        return seconds + CELL_OVERHEAD_S, "engine"
    requests = cell.num_requests if work is None else work.rounds
    seconds = measured_seconds(cell, requests, measured or {})
    if seconds is not None:
        return seconds + CELL_OVERHEAD_S, "measured"
    return None, "unknown"


def measured_seconds(cell: Cell, requests: int, measured: Mapping[str, Measured]
                     ) -> float | None:
    """The load of `cell` (`requests` of them) from the measured cells of the same server: the
    cell's own measurement if it has one, else the measured load nearest to it (the same
    concurrency or rate, else the nearest on a log scale; a closed loop is compared only with
    closed loops, an open loop with open loops). A load's window is about its requests over its
    requests in flight (closed loop) or its arrival rate (open loop), so that cell's seconds are
    scaled by requests / its requests and by its concurrency (rate) / this cell's: the same
    latency per request as the nearest load. None when the server has no measured cell of the
    cell's kind."""
    level = cell.rate if cell.rate is not None else cell.concurrency
    if not level or not requests:
        return None
    open_loop = cell.rate is not None
    same = [(cell_id, m) for cell_id, m in sorted(measured.items())
            if m.server_key == cell.server_key and (m.rate is not None) == open_loop
            and m.requests > 0 and m.seconds > 0
            and ((m.rate if open_loop else m.concurrency) or 0) > 0]
    if not same:
        return None

    def distance(item: tuple[str, Measured]) -> tuple[bool, float]:
        cell_id, m = item
        its = float((m.rate if open_loop else m.concurrency) or 0)
        return cell_id != cell.cell_id, abs(math.log(its / level))

    _, nearest = min(same, key=distance)
    its_level = float((nearest.rate if open_loop else nearest.concurrency) or 0)
    return nearest.seconds * (requests / nearest.requests) * (its_level / level)
