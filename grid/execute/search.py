"""The run loop of an adaptive search (docs/search.md): replay the search from the committed
cells (grid/analysis/search.py `replay`, pure), run the cells of the step that is not measured
yet with the normal controller, and again, until the search stops. Nothing but the committed
cells carries the search's state, so the same command after a crash continues the same search
and a finished search measures nothing new; `search.json` in the run folder is the trace
(rewritten after every step), which the report and decision.json show."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grid.analysis import Slo
from grid.analysis.cellstats import REQUEST_COLUMNS, analyse_cells
from grid.analysis.search import Measured, Point, Step, replay, result
from grid.plan.cells import Cell
from grid.plan.search import SearchSetup
from grid.store.loader import load_cells, load_requests
from grid.store.record import RunRecord

TRACE_FILE = "search.json"
EXIT_FAILED_CELLS = 3


def measured_points(run_dir: Path, setup: SearchSetup, slo: Slo) -> dict[Point, Measured]:
    """The points whose two cells are committed as done with a throughput, with the cells'
    bootstrap replicates (the same analysis as the report's, so the same intervals)."""
    ids = {c.cell_id for cells in setup.points.values() for c in cells}
    cells = load_cells(run_dir) if (run_dir / "cells").is_dir() else None
    if cells is None or cells.empty:
        return {}
    cells = cells[cells.cell_id.isin(ids) & (cells.status == "done")]
    if cells.empty:
        return {}
    requests = load_requests(run_dir, columns=REQUEST_COLUMNS,
                             filters=[("cell_id", "in", sorted(cells.cell_id))])
    stats = analyse_cells(cells.reset_index(drop=True), requests, slo)
    value = dict(zip(stats.table.cell_id.astype(str),
                     stats.table.output_tok_s.astype(float), strict=True))
    out = {}
    for point, (base, var) in setup.points.items():
        a, b = value.get(base.cell_id, math.nan), value.get(var.cell_id, math.nan)
        if math.isfinite(a) and math.isfinite(b):
            out[point] = Measured(a, b, np.asarray(stats.replicates[base.cell_id]["output_tok_s"]),
                                  np.asarray(stats.replicates[var.cell_id]["output_tok_s"]))
    return out


def write_trace(run_dir: Path, setup: SearchSetup, steps: list[Step],
                note: str | None = None) -> dict:
    """search.json: the question, every step with why it was taken, and the outcome."""
    trace = {**setup.as_json(), "result": {**result(setup.space, steps), "note": note},
             "steps": [s.as_json() for s in steps]}
    tmp = run_dir / f".{TRACE_FILE}.tmp"
    tmp.write_text(json.dumps(trace, indent=2))
    os.replace(tmp, run_dir / TRACE_FILE)
    return trace


@dataclass
class SearchOutcome:
    code: int
    steps: list[Step]
    cells: list[Cell] = field(default_factory=list)
    """Every cell the search chose (measured or not)."""


def run_search(setup: SearchSetup, run_dir: Path, record: RunRecord, slo: Slo,
               run_cells: Callable[[list[Cell]], int], echo: Callable[[str], None],
               retry_failed: bool = True) -> SearchOutcome:
    """Alternate replay and measurement until the search stops; `run_cells(cells)` runs cells
    with the controller and returns 0 (or the exit code of an interruption). Each step's cells
    begin with the variant that ended the previous step, whose server the controller keeps."""
    tried: set[Point] = set()
    shown = 0
    last_variant: str | None = None  # its server may still run: its cells go first
    while True:
        measured = measured_points(run_dir, setup, slo)
        steps = replay(setup.space, measured)
        chosen = [p for s in steps for p in s.points]
        cells = setup.cells_of(chosen)
        record.ledger.add_cells(cells)
        for step in steps[shown:]:
            done = "" if step.stop or step is steps[-1] else " (measured)"
            echo(f"search step {step.number}: {step.why}{done}")
        shown = len(steps)
        last = steps[-1]
        if last.stop is not None:
            write_trace(run_dir, setup, steps)
            echo(f"search stopped: {last.stop} after {last.cells_before} cells "
                 f"(budget {setup.space.max_cells})")
            return SearchOutcome(0, steps, cells)
        missing = [p for p in last.points if p not in measured]
        todo = [c for c in setup.cells_of(missing, last_variant)
                if record.status(c.cell_id) != "done"
                and (retry_failed or record.status(c.cell_id) != "failed")]
        if any(p in tried for p in missing) or not todo:
            # A cell of this step failed (or is skipped): the search cannot go on from it.
            where = ", ".join(f"c={c} repeat {r}" for c, r in missing)
            note = f"search paused: cells at {where} did not complete; fix and run again"
            write_trace(run_dir, setup, steps, note)
            echo(note)
            return SearchOutcome(EXIT_FAILED_CELLS, steps, cells)
        write_trace(run_dir, setup, steps)
        tried.update(missing)
        code = run_cells(todo)
        last_variant = todo[-1].variant
        if code:
            return SearchOutcome(code, steps, cells)
