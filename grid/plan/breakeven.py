"""The plan side of the break-even search (`grid.search.kind=breakeven`, docs/search.md): the
forced lengths it may measure, every cell it may choose and what the plan prints. The steps are
grid/analysis/breakeven_search.py (pure); the loop that runs them is grid/execute/search.py's.

A break-even cell is an ordinary cell: the baseline's at a load, else the grid's speculative
variant composed with `variant.forced_acceptance.length=a` at `load.concurrency=c` (the id a
dense grid of those factors gives the same cell, labelled `<variant>__forced_len-a`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from engines.forced import speculative_steps
from grid.analysis.breakeven_search import (
    BASELINE as BASELINE_INDEX,
)
from grid.analysis.breakeven_search import (
    BreakevenSpace,
    BreakevenStep,
    Point,
    chosen,
    next_step,
)
from grid.analysis.search import Space
from grid.plan.cells import Cell
from grid.plan.depth import with_settings
from grid.plan.search import BASELINE, SearchError, check_one_against_baseline
from grid.plan.workloads import WorkloadPlan

LENGTH_KEY = "variant.forced_acceptance.length"
DEFAULT_LENGTHS = 9
"""Forced lengths from 1 to k + 1 when grid.search.lengths is unset."""


def breakeven_lengths(cfg: DictConfig, steps: int) -> tuple[float, ...]:
    """grid.search.lengths, checked (ascending, >= 2 of them, within [1, k + 1]); unset:
    DEFAULT_LENGTHS evenly from 1 to k + 1."""
    raw = OmegaConf.select(cfg, "grid.search.lengths", default=None)
    if raw is None:
        n = DEFAULT_LENGTHS
        return tuple(round(1.0 + steps * i / (n - 1), 4) for i in range(n))
    values = OmegaConf.to_container(raw, resolve=True) if not isinstance(raw, list) else raw
    lengths = list(values) if isinstance(values, list) else []
    if (len(lengths) < 2 or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                    for v in lengths)
            or lengths != sorted(set(lengths)) or lengths[0] < 1 or lengths[-1] > steps + 1):
        raise SearchError("grid.search.lengths must be 2 or more ascending accept lengths in "
                          f"[1, {steps + 1}] (k = speculative_num_steps = {steps}), got "
                          f"{lengths}")
    return tuple(float(v) for v in lengths)


def breakeven_universe(cfg: DictConfig, space: Space, cells: Sequence[Cell],
                       workloads: WorkloadPlan) -> tuple[list[Cell], BreakevenSpace]:
    """The baseline's cells as they are and, for each of the speculative variant's cells, one
    cell per forced length (the composition rule a dense grid of that factor gives);
    alignments follow the cells. SearchError for a grid that is not the baseline and one
    speculative variant on one workload, or a variant that forces acceptance itself."""
    check_one_against_baseline(cells, "breakeven compares one speculative variant")
    own = next(c for c in cells if c.config["variant"]["name"] != BASELINE).config["variant"]
    steps = speculative_steps(own.get("args") or {})
    if steps is None:
        raise SearchError(f"grid.search.kind=breakeven: variant {own['name']} does not "
                          "speculate: there is no acceptance to force")
    if any(dict(own.get("forced_acceptance") or {}).values()):
        raise SearchError("grid.search.kind=breakeven sets variant.forced_acceptance itself; "
                          f"variant {own['name']} already sets it")
    lengths = breakeven_lengths(cfg, steps)
    out = []
    for cell in cells:
        if cell.config["variant"]["name"] == BASELINE:
            out.append(cell)
            continue
        for a in lengths:
            forced = with_settings(cell, {LENGTH_KEY: a})
            if cell.cell_id in workloads.alignments:
                workloads.alignments[forced.cell_id] = workloads.alignments[cell.cell_id]
            out.append(forced)
    return out, BreakevenSpace(space.lattice, lengths, space.max_cells)


@dataclass
class BreakevenSetup:
    """A planned break-even search: its space and the cell of every point it may choose."""

    space: BreakevenSpace
    points: dict[Point, Cell]
    variant: str
    workload: str

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(p for p in self.points if p[1] != BASELINE_INDEX)]

    def describe(self, point: Sequence[int]) -> str:
        load, i = point
        return (f"c={load} {BASELINE}" if i == BASELINE_INDEX
                else f"c={load} length {self.space.lengths[i]:g}")

    def cells_of(self, points: Sequence[Sequence[int]], first: str | None = None
                 ) -> list[Cell]:
        """The points' cells, each server's in ascending load: variant `first` first (its
        server may still run from the previous step), then the baseline, then by length."""
        cells = [self.points[(p[0], p[1])] for p in sorted(tuple(p) for p in points)]
        return sorted(cells, key=lambda c: (c.variant != first, c.variant != BASELINE,
                                            c.variant, c.concurrency or 0))

    def first_step(self) -> BreakevenStep:
        return next_step(self.space, {})

    def as_json(self) -> dict[str, Any]:
        return {"kind": "breakeven", "baseline": BASELINE, "variant": self.variant,
                "workload": self.workload, "load_kind": "concurrency",
                "loads": list(self.space.loads), "lengths": list(self.space.lengths)}

    def trace(self, steps: Sequence[BreakevenStep], note: str | None) -> dict[str, Any]:
        """search.json: the question, every step and the outcome."""
        last = steps[-1]
        return {**self.as_json(),
                "result": {"stop": last.stop, "cells": len(chosen(steps)),
                           "max_cells": self.space.max_cells,
                           "dense_cells": self.space.dense_cells,
                           "brackets": {str(k): v for k, v in last.brackets.items()},
                           "note": note},
                "steps": [s.as_json() for s in steps]}

    def plan_lines(self) -> list[str]:
        space, first = self.space, self.first_step()
        return [
            f"search: break-even accept length of {self.variant} vs {BASELINE} on "
            f"{self.workload} (forced acceptance: performance only), concurrency "
            f"{space.loads[0]}..{space.loads[-1]}",
            f"  loads ({len(space.loads)}): {' '.join(map(str, space.loads))}; forced lengths "
            f"({len(space.lengths)}): {' '.join(f'{a:g}' for a in space.lengths)}",
            f"  budget: grid.search.max_cells={space.max_cells} (the dense grid of these loads "
            f"and lengths with the baseline: {space.dense_cells} cells)",
            f"  step 1: {first.why} -> {len(first.points)} cells (listed below); later steps "
            "follow from the committed cells",
        ]


def breakeven_setup(space: BreakevenSpace, cells: Sequence[Cell]) -> BreakevenSetup:
    """The universe's cells by point."""
    points: dict[Point, Cell] = {}
    index = {a: i for i, a in enumerate(space.lengths)}
    for cell in cells:
        forced = cell.config["variant"].get("forced_acceptance") or {}
        i = BASELINE_INDEX if forced.get("length") is None else index[float(forced["length"])]
        points[(int(cell.concurrency or 0), i)] = cell
    spec = next(c for c in cells if c.config["variant"]["name"] != BASELINE)
    return BreakevenSetup(space, points, spec.config["variant"]["name"], spec.workload)
