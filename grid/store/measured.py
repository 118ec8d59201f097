"""The measured cells the plan's estimate reads (grid/plan/estimate.py `Measured`): this run
folder's, then those of earlier runs beside it in the results folder. A cell's server key is a
stable hash of the server's identity (engine, version, model, flags: grid/plan/cells.py), so an
earlier run's cell on the same server tells how fast this one will be. The plan is pure, so the
entry point reads them here and hands them over."""

from __future__ import annotations

import math
from pathlib import Path

from grid.plan.estimate import Measured
from grid.store.loader import DamagedFileError, load_cells

EARLIER_RUNS = 20
"""Earlier run folders read for estimates, newest first: enough for a user's recent history of
one node, and a bound on what planning reads (each is a cells table of a few kB)."""


def measured_cells(run_dir: Path, results_dir: Path | None = None) -> dict[str, Measured]:
    """Cell id -> the latest committed attempt of each done cell in `run_dir` with a measured
    load window; with `results_dir`, also the done cells of the newest `EARLIER_RUNS` other run
    folders there, keyed `RUN/CELL_ID` (their servers match this run's cells by server key).
    Empty for folders that do not exist yet. Damaged files are left out (the run reports them
    where it reads results)."""
    out = _done_cells(run_dir, "")
    for other in _earlier_runs(run_dir, results_dir):
        out.update(_done_cells(other, f"{other.name}/"))
    return out


def _earlier_runs(run_dir: Path, results_dir: Path | None) -> list[Path]:
    """The newest run folders of `results_dir` other than `run_dir` (a run folder has cells)."""
    if results_dir is None or not results_dir.is_dir():
        return []
    runs = [p for p in results_dir.iterdir()
            if p.is_dir() and (p / "cells").is_dir() and p.resolve() != run_dir.resolve()]
    runs.sort(key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
    return runs[:EARLIER_RUNS]


def _done_cells(run_dir: Path, prefix: str) -> dict[str, Measured]:
    damaged: list[DamagedFileError] = []
    try:
        cells = load_cells(run_dir, damaged=damaged)
    except (OSError, ValueError):  # another tool's folder, or one being written: no estimate
        return {}
    out: dict[str, Measured] = {}
    for row in cells[cells.status == "done"].itertuples(index=False):
        seconds, requests = _number(row.duration_s), _number(row.num_requests)
        if seconds is None or requests is None or seconds <= 0 or requests <= 0:
            continue
        out[prefix + str(row.cell_id)] = Measured(
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
