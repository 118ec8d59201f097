"""The run loop of an adaptive search (docs/search.md): replay the search from the committed
cells (grid/analysis/search.py `replay`, pure), run the cells of the step that is not measured
yet with the normal controller, and again, until the search stops. Nothing but the committed
cells carries the search's state, so the same command after a crash continues the same search
and a finished search measures nothing new; `search.json` in the run folder is the trace
(rewritten after every step), which the report and decision.json show."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.analysis.breakeven_search import BreakevenStep
from grid.analysis.breakeven_search import replay as breakeven_replay
from grid.analysis.depth_confirm import AnyDepthStep
from grid.analysis.search import Measured, Step, prior_check, replay, result
from grid.analysis.threshold import (
    ConfirmStep,
    Pair,
    replay_threshold,
    threshold_result,
)
from grid.execute.depth import cell_throughputs, depth_answer, depth_steps, depth_trace
from grid.plan.breakeven import BreakevenSetup
from grid.plan.build import Plan, build_plan
from grid.plan.cells import Cell, group_by_server
from grid.plan.depth import DepthSetup
from grid.plan.search import SearchSetup, step_plan
from grid.plan.workloads import WorkloadPlan
from grid.store.files import write_json
from grid.store.record import EXIT_FAILED_CELLS, RunRecord

TRACE_FILE = "search.json"
K = TypeVar("K")


def measured_points(run_dir: Path, points: Mapping[K, tuple[Cell, Cell]], slo: Slo
                    ) -> dict[K, Measured]:
    """The points whose two cells are committed as done with a throughput, with the cells'
    bootstrap replicates (the same analysis as the report's, so the same intervals)."""
    value = cell_throughputs(run_dir, (c for cells in points.values() for c in cells), slo)
    return {point: Measured(value[base.cell_id].value, value[var.cell_id].value,
                            value[base.cell_id].reps, value[var.cell_id].reps)
            for point, (base, var) in points.items()
            if base.cell_id in value and var.cell_id in value}


AnyStep = Step | ConfirmStep | AnyDepthStep | BreakevenStep
AnySetup = SearchSetup | DepthSetup | BreakevenSetup


def search_steps(setup: AnySetup, run_dir: Path, slo: Slo
                 ) -> tuple[list[AnyStep], set[tuple[int, ...]]]:
    """The search replayed from the committed cells, and the points measured so far. A
    threshold search's confirmation pairs are read as the replay names them; a depth search
    is grid/execute/depth.py's."""
    if isinstance(setup, DepthSetup):
        depth, seen = depth_steps(setup, run_dir, slo)
        return list(depth), seen
    if isinstance(setup, BreakevenSetup):  # point estimates decide (breakeven_search.py)
        value = cell_throughputs(run_dir, setup.points.values(), slo)
        known = {p: value[c.cell_id].value for p, c in setup.points.items()
                 if c.cell_id in value}
        return list(breakeven_replay(setup.space, known)), set(known)
    measured = measured_points(run_dir, setup.points, slo)
    if setup.threshold is None:
        return list(replay(setup.space, measured)), set(measured)
    t = setup.threshold

    def steps_with(confirmed: Mapping[Pair, Measured]) -> list[AnyStep]:
        return list(replay_threshold(setup.space, t.reserve, t.honoured, t.candidates,
                                     measured, confirmed))

    # The pairs follow from the crossover search's cells alone, so the first replay names
    # them; every repeat of them is read at once, and the second replay is the search.
    steps = steps_with({})
    pairs = {(a, b, r) for a, b, _ in (p for p in steps[-1].points if len(p) == 3)
             for r in range(setup.space.max_repeats)}
    if not pairs:
        return steps, set(measured)
    confirmed = measured_points(run_dir, {p: setup.pair_cells(p) for p in pairs}, slo)
    return steps_with(confirmed), set(measured) | set(confirmed)


def search_result(setup: SearchSetup, steps: Sequence[AnyStep]) -> dict:
    """The outcome for the trace: the crossover search's (grid/analysis/search.py `result`)
    and, for a threshold search, the ranking and the recommendation."""
    crossing = [s for s in steps if isinstance(s, Step)]
    space = setup.space
    if setup.threshold is not None:
        space = dataclasses.replace(space, max_cells=space.max_cells - setup.threshold.reserve)
    out = result(space, crossing)
    out["max_cells"] = setup.space.max_cells
    if setup.prior is not None:
        out["prior"] = {"source": setup.prior.label, "path": setup.prior.path,
                        **prior_check(space.lattice, setup.prior.predicted,
                                      crossing[-1].speedups)}
    last = steps[-1]
    if isinstance(last, ConfirmStep):
        out = {**out, **threshold_result(steps), "cells": last.cells_before}  # type: ignore[arg-type]
    return out


def plan_step(cfg: DictConfig, plan: Plan, setup: AnySetup, workloads: WorkloadPlan,
              cells: list[Cell]) -> Plan:
    """A search step's plan: the run's, narrowed to the step's cells; cells it does not hold
    (a threshold search's confirmation) are planned like any grid's cells: flags, loads,
    server specs, with the variant's alignment with its drafter."""
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


def write_trace(run_dir: Path, setup: AnySetup, steps: list[AnyStep],
                note: str | None = None) -> dict:
    """search.json: the question, every step with why it was taken, and the outcome."""
    if isinstance(setup, BreakevenSetup):
        trace = setup.trace(steps, note)  # type: ignore[arg-type]
    elif isinstance(setup, DepthSetup):
        trace = depth_trace(setup, steps, note)  # type: ignore[arg-type]
    else:
        trace = {**setup.as_json(), "result": {**search_result(setup, steps), "note": note},
                 "steps": [s.as_json() for s in steps]}
    # Not fsynced: the trace is replayed from the committed cells on every start.
    write_json(run_dir / TRACE_FILE, trace, fsync=False)
    return trace


@dataclass
class SearchOutcome:
    code: int
    steps: list[AnyStep]
    cells: list[Cell] = field(default_factory=list)
    """Every cell the search chose (measured or not)."""


def run_search(setup: AnySetup, run_dir: Path, record: RunRecord, slo: Slo,
               run_cells: Callable[[list[Cell]], int], echo: Callable[[str], None],
               retry_failed: bool = True) -> SearchOutcome:
    """Alternate replay and measurement until the search stops; `run_cells(cells)` runs cells
    with the controller and returns 0 (or the exit code of an interruption). Each step's cells
    begin with the variant that ended the previous step, whose server the controller keeps."""
    tried: set[tuple[int, ...]] = set()
    shown = 0
    last_variant: str | None = None  # its server may still run: its cells go first
    while True:
        steps, measured = search_steps(setup, run_dir, slo)
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
            answer = (f"; set speculative_disable_above_batch={last.threshold}"
                      if isinstance(last, ConfirmStep) and last.threshold is not None else "")
            if isinstance(setup, DepthSetup):
                answer = depth_answer(steps)  # type: ignore[arg-type]
            echo(f"search stopped: {last.stop} after {last.cells_before} cells "
                 f"(budget {setup.space.max_cells}){answer}")
            return SearchOutcome(0, steps, cells)
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
            return SearchOutcome(EXIT_FAILED_CELLS, steps, cells)
        write_trace(run_dir, setup, steps)
        tried.update(missing)
        code = run_cells(todo)
        last_variant = group_by_server(todo)[-1].variant  # the server the step ended on
        if code:
            return SearchOutcome(code, steps, cells)
