"""What is the highest load at which the variant meets the SLOs? (`grid.search.kind=capacity`,
docs/search.md): the report's capacity (grid/analysis/capacity.py) found with a few cells on
the load lattice instead of a dense grid: bracket, then bisect on whether each load holds the
SLOs (its attainment's interval and point estimate; steps.py, pure). The whole question is
this folder: plan and run here, steps in steps.py, report in report.py."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.analysis.capacity import ATTAINMENT, Attainment, cell_attainments, fewest_to_meet
from grid.plan.cells import Cell
from grid.plan.search import SearchError, search_space
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.capacity.report import answer_sentence, trace_lines
from grid.questions.capacity.steps import next_step, replay, result
from grid.questions.measure import analysed


def measured_attainments(run_dir: Path, cells: Iterable[Cell], slo: Slo
                         ) -> dict[str, Attainment]:
    """The attainment of each cell committed as done (the report's analysis and reading), by
    cell id."""
    stats = analysed(run_dir, cells, slo, replicates=1)
    return {} if stats is None else cell_attainments(stats.table)


class CapacityPlanned(Planned):
    def __init__(self, lattice: tuple[int, ...], points: dict[int, Cell], max_cells: int,
                 target: float) -> None:
        self.lattice, self.points, self.max_cells, self.target = (lattice, points, max_cells,
                                                                  target)
        self.attainment: dict[int, Attainment] = {}

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        values = measured_attainments(run_dir, self.points.values(), slo)
        self.attainment = {p: values[c.cell_id] for p, c in self.points.items()
                           if c.cell_id in values}
        return list(replay(self.lattice, self.attainment, self.max_cells, self.target)), set(
            self.attainment)

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        return [self.points[p] for p in sorted(points)]

    def first_points(self) -> list[Any]:
        return list(next_step(self.lattice, {}, self.max_cells, self.target).points)

    @property
    def variant_cell(self) -> Cell:
        return self.points[self.lattice[0]]

    def describe(self, point: Any) -> str:
        return f"c={point}"

    def plan_lines(self) -> list[str]:
        cell = self.variant_cell
        return [f"search: capacity of {cell.variant} on {cell.workload} (SLO attainment >= "
                f"{self.target:.0%}), concurrency {self.lattice[0]}..{self.lattice[-1]}",
                f"  lattice ({len(self.lattice)}): {' '.join(map(str, self.lattice))}; budget "
                f"grid.search.max_cells={self.max_cells} (the dense grid: {len(self.lattice)})",
                f"  a load meets the SLOs when its attainment's exact 95 % interval lies at or "
                f"above {self.target:.0%}: {fewest_to_meet(self.target)} or more steady-window "
                "requests all within them; fewer leave it undecided",
                "  step 1: the lattice's ends; later steps follow from the committed cells"]

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        cell = self.variant_cell
        return {"kind": "capacity", "variant": cell.variant, "workload": cell.workload,
                "load_kind": "concurrency", "target": self.target,
                "result": {**result(steps, self.attainment, self.lattice, self.target),
                           "max_cells": self.max_cells, "note": note},
                "steps": [s.as_json() for s in steps]}

    def stop_line(self, steps: Sequence[Any]) -> str:
        found = result(steps, self.attainment, self.lattice, self.target)
        return "" if found["capacity"] is None else f"; capacity c={found['capacity']}"


class Capacity(Question):
    kind = "capacity"

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        """One variant on one workload, one cell per lattice load (SearchError otherwise)."""
        variants = sorted({c.variant for c in cells})
        names = sorted({c.workload for c in cells})
        if len(variants) != 1 or len(names) != 1:
            raise SearchError(f"grid.search.kind=capacity searches one variant on one "
                              f"workload; the grid has variants {', '.join(variants)} and "
                              f"workloads {', '.join(names)}")
        space = search_space(cfg)
        points = {int(c.concurrency or 0): c for c in cells}
        return CapacityPlanned(space.lattice, points, space.max_cells, ATTAINMENT)

    def lines(self, trace: dict) -> list[str]:
        return trace_lines(trace)

    def answer(self, trace: dict) -> str | None:
        return answer_sentence(trace)


QUESTION = Capacity()
