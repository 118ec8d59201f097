"""At which accept length does speculation break even? (`grid.search.kind=breakeven`,
docs/search.md): forced accept lengths searched load by load against the baseline, the
break-even bracketed at each load (never claimed past the data). The whole question is this
folder: plan and run here, steps in steps.py (pure), report in report.py.

A break-even cell is an ordinary cell: the baseline's at a load, else the grid's speculative
variant composed with `variant.forced_acceptance.length=a` at `load.concurrency=c` (the id a
dense grid of those factors gives the same cell, labelled `<variant>__forced_len-a`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from engines.forced import speculative_steps
from grid.analysis import Slo
from grid.plan.cells import Cell
from grid.plan.search import (
    BASELINE,
    LENGTH_KEY,
    SearchError,
    breakeven_lengths,
    check_one_against_baseline,
    search_space,
    with_twins,
)
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.breakeven.report import answer_sentence, trace_lines
from grid.questions.breakeven.steps import BASELINE as BASELINE_INDEX
from grid.questions.breakeven.steps import BreakevenSpace, Point, chosen, next_step, replay
from grid.questions.measure import point_throughputs
from grid.questions.steps import first_step_line


class BreakevenPlanned(Planned):
    """A break-even search planned for one run: its space and the cell of every point."""

    def __init__(self, space: BreakevenSpace, cells: Sequence[Cell]) -> None:
        self.space, self.max_cells = space, space.max_cells
        index = {a: i for i, a in enumerate(space.lengths)}
        self.points: dict[Point, Cell] = {}
        for cell in cells:
            forced = cell.config["variant"].get("forced_acceptance") or {}
            i = BASELINE_INDEX if forced.get("length") is None else index[float(forced["length"])]
            self.points[(int(cell.concurrency or 0), i)] = cell
        spec = next(c for c in cells if c.config["variant"]["name"] != BASELINE)
        self.variant, self.workload = str(spec.config["variant"]["name"]), spec.workload

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(p for p in self.points if p[1] != BASELINE_INDEX)]

    def describe(self, point: Sequence[int]) -> str:
        load, i = point
        return (f"c={load} {BASELINE}" if i == BASELINE_INDEX
                else f"c={load} length {self.space.lengths[i]:g}")

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        """The points' cells, each server's in ascending load: variant `first` first (its
        server may still run from the previous step), then the baseline, then by length."""
        cells = [self.points[(p[0], p[1])] for p in sorted(tuple(p) for p in points)]
        return sorted(cells, key=lambda c: (c.variant != first, c.variant != BASELINE,
                                            c.variant, c.concurrency or 0))

    def first_points(self) -> list[Any]:
        return list(next_step(self.space, {}).points)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """Point estimates decide (steps.py)."""
        known = {p: t.value for p, t in point_throughputs(run_dir, self.points, slo).items()}
        return list(replay(self.space, known)), set(known)

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        last = steps[-1]
        return {"kind": "breakeven", "baseline": BASELINE, "variant": self.variant,
                "workload": self.workload, "load_kind": "concurrency",
                "loads": list(self.space.loads), "lengths": list(self.space.lengths),
                "result": {"stop": last.stop, "cells": len(chosen(steps)),
                           "max_cells": self.space.max_cells,
                           "dense_cells": self.space.dense_cells,
                           "brackets": {str(k): v for k, v in last.brackets.items()},
                           "note": note},
                "steps": [s.as_json() for s in steps]}

    def plan_lines(self) -> list[str]:
        space, first = self.space, next_step(self.space, {})
        return [
            f"search: break-even accept length of {self.variant} vs {BASELINE} on "
            f"{self.workload} (forced acceptance: performance only), concurrency "
            f"{space.loads[0]}..{space.loads[-1]}",
            f"  loads ({len(space.loads)}): {' '.join(map(str, space.loads))}; forced lengths "
            f"({len(space.lengths)}): {' '.join(f'{a:g}' for a in space.lengths)}",
            f"  budget: grid.search.max_cells={space.max_cells} (the dense grid of these loads "
            f"and lengths with the baseline: {space.dense_cells} cells)",
            first_step_line(first.why, len(first.points)),
        ]


class Breakeven(Question):
    kind = "breakeven"
    lines = staticmethod(trace_lines)
    answer = staticmethod(answer_sentence)

    def check(self, cfg: DictConfig) -> None:
        for axis in cfg.grid.axes:
            if str(axis).startswith("variant.forced_acceptance"):
                raise SearchError(f"grid.search.kind=breakeven chooses the forced lengths "
                                  f"itself (grid.search.lengths); drop the grid axis {axis}")
        super().check(cfg)

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """The baseline's cells as they are and each of the speculative variant's cells once
        per forced length; the context: the space. SearchError for a grid that is not the
        baseline and one speculative variant on one workload, or a variant that forces
        acceptance itself."""
        check_one_against_baseline(cells, "breakeven compares one speculative variant")
        own = next(c for c in cells if c.config["variant"]["name"] != BASELINE).config["variant"]
        steps = speculative_steps(own.get("args") or {})
        if steps is None:
            raise SearchError(f"grid.search.kind=breakeven: variant {own['name']} does not "
                              "speculate: there is no acceptance to force")
        if any(dict(own.get("forced_acceptance") or {}).values()):
            raise SearchError("grid.search.kind=breakeven sets variant.forced_acceptance "
                              f"itself; variant {own['name']} already sets it")
        lengths = breakeven_lengths(cfg, steps)
        space = search_space(cfg)
        out = with_twins(cells, workloads, LENGTH_KEY, lengths,
                         keep=lambda c: c.config["variant"]["name"] == BASELINE)
        return out, BreakevenSpace(space.lattice, lengths, space.max_cells)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        return BreakevenPlanned(context, cells)

QUESTION = Breakeven()
