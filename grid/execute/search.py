"""The run loop of an adaptive search (docs/questions.md "The run loop and resume"): replay, run
the step not measured yet, again until it stops; `search.json` is the trace."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.plan.build import Plan, build_plan
from grid.plan.cells import Cell, group_by_server
from grid.plan.search import step_plan
from grid.plan.workloads import WorkloadPlan
from grid.questions import TRACE_FILE, Planned
from grid.questions.steps import StuckSearch
from grid.store.files import write_json
from grid.store.record import EXIT_FAILED_CELLS, RunRecord


def plan_step(cfg: DictConfig, plan: Plan, setup: Planned, workloads: WorkloadPlan,
              cells: list[Cell]) -> Plan:
    """A search step's plan: the run's, narrowed to the step's cells; cells it does not hold (a
    confirmation's) planned like any grid's, with the variant's alignment."""
    known = {c.cell_id for c in plan.cells}
    if all(c.cell_id in known for c in cells):
        return step_plan(plan, cells)
    alignment = workloads.alignments.get(setup.variant_cell.cell_id)
    if alignment is not None:
        workloads.alignments.update({c.cell_id: alignment for c in cells
                                     if c.cell_id not in known})
    step = build_plan(cfg, cells, workloads, plan.run_dir.parent)
    return dataclasses.replace(step, run_id=plan.run_id, run_dir=plan.run_dir,
                               measured=plan.measured)


def write_trace(run_dir: Path, setup: Planned, steps: list[Any], note: str | None = None
                ) -> None:
    """search.json: the question, every step with why it was taken, and the outcome."""
    # Not fsynced: the trace is replayed from the committed cells on every start.
    write_json(run_dir / TRACE_FILE, setup.trace(steps, note), fsync=False)


@dataclass
class SearchOutcome:
    code: int
    cells: list[Cell]
    """Every cell the search chose (measured or not)."""


def run_search(setup: Planned, run_dir: Path, record: RunRecord, slo: Slo,
               run_cells: Callable[[list[Cell]], int], echo: Callable[[str], None],
               retry_failed: bool = True) -> SearchOutcome:
    """Alternate replay and measurement until the search stops; `run_cells(cells)` returns 0 or
    an interruption's exit code. A step's cells begin with the variant the last one ended on."""
    tried: set[tuple[int, ...]] = set()
    shown = 0
    last_variant: str | None = None  # its server may still run: its cells go first
    cells: list[Cell] = []
    while True:
        try:
            steps, measured = setup.replay(run_dir, slo)
        except StuckSearch as e:  # the cells measured stay; the question says why it ends
            echo(f"search stopped: {e}")
            return SearchOutcome(EXIT_FAILED_CELLS, cells)
        chosen = [p for s in steps for p in s.points]
        cells = setup.cells_of(chosen)
        record.add_cells(cells)
        for step in steps[shown:]:
            done = "" if step.stop or step is steps[-1] else " (measured)"
            echo(f"search step {step.number}: {step.why}{done}")
        shown = len(steps)
        last = steps[-1]
        if last.stop is not None:
            write_trace(run_dir, setup, steps)
            echo(f"search stopped: {last.stop} after {last.cells_before} cells "
                 f"(budget {setup.max_cells}){setup.stop_line(steps)}")
            return SearchOutcome(0, cells)
        missing = [p for p in last.points if p not in measured]
        todo = [c for c in setup.cells_of(missing, last_variant)
                if record.status(c.cell_id) != "done"
                and (retry_failed or record.status(c.cell_id) != "failed")]
        if any(p in tried for p in missing) or not todo:
            # A cell of this step failed (or is skipped): the search cannot go on from it.
            where = ", ".join(setup.describe(p) for p in missing)
            note = f"search paused: cells at {where} did not complete; fix and run again"
            write_trace(run_dir, setup, steps, note)
            echo(note)
            return SearchOutcome(EXIT_FAILED_CELLS, cells)
        write_trace(run_dir, setup, steps)
        tried.update(missing)
        code = run_cells(todo)
        last_variant = group_by_server(todo)[-1].variant  # the server the step ended on
        if code:
            return SearchOutcome(code, cells)
