"""The run folder's measured cells, as the plan's estimate reads them (grid/plan/estimate.py
`Measured`): the plan is pure, so the entry point reads them here and hands them over."""

from __future__ import annotations

import math
from pathlib import Path

from grid.plan.estimate import Measured
from grid.store.loader import DamagedFileError, load_cells


def measured_cells(run_dir: Path) -> dict[str, Measured]:
    """Cell id -> the latest committed attempt of each done cell in `run_dir` with a measured
    load window; empty for a folder that does not exist yet. Damaged files are left out (the
    run reports them where it reads results)."""
    damaged: list[DamagedFileError] = []
    cells = load_cells(run_dir, damaged=damaged)
    out: dict[str, Measured] = {}
    for row in cells[cells.status == "done"].itertuples(index=False):
        seconds, requests = _number(row.duration_s), _number(row.num_requests)
        if seconds is None or requests is None or seconds <= 0 or requests <= 0:
            continue
        out[str(row.cell_id)] = Measured(
            server_key=str(row.server_key), concurrency=_whole(row.concurrency),
            rate=_number(row.rate), requests=int(requests), seconds=seconds)
    return out


def _number(value: object) -> float | None:
    """A Parquet cell as a float (None for a null or NaN)."""
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def _whole(value: object) -> int | None:
    number = _number(value)
    return None if number is None else int(number)
