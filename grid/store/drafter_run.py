"""An earlier run folder read for its drafter's acceptance (`breakeven.drafter_run`,
`python -m grid.report RUN --drafter-run OLD`; grid/analysis/drafter_run.py): its cells and the
request columns the accept length needs, a few kB to MB, read before anything starts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from grid.analysis.drafter_run import DrafterRun, drafter_run
from grid.store.loader import DamagedFileError, load_cells, load_requests

COLUMNS = ["cell_id", "workload", "status", "domain", "output_tokens", "spec_verify_ct"]


def read_drafter_run(path: str | Path, named: str) -> DrafterRun:
    """The run folder's drafter lengths; ValueError (one line, starting with `named`: how the
    user gave it) for a path that is no run folder or a run without an unforced speculative
    cell. Damaged files are left out."""
    folder = Path(path).expanduser()
    if not (folder / "cells").is_dir():
        raise ValueError(f"{named}: {path} is not a run folder (it holds no committed cells)")
    damaged: list[DamagedFileError] = []
    cells = load_cells(folder, damaged=damaged)
    requests = load_requests(folder, columns=COLUMNS, damaged=damaged)
    try:
        found = drafter_run(folder.resolve().name, requests, cells)
    except ValueError as e:
        raise ValueError(f"{named}: {e}") from None
    return dataclasses.replace(found, path=str(folder.resolve()))
