"""Where does speculation stop paying? (`grid.search.kind=crossover`, docs/search.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.analysis.search import Space
from grid.plan import search
from grid.plan.cells import Cell
from grid.plan.search import BASELINE, SearchError
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.crossover.steps import (
    CrossoverStep,
    Point,
    describe,
    next_step,
    prior_check,
    prior_levels,
    replay,
    result,
)
from grid.questions.measure import compared_points
from grid.questions.steps import first_step_line, step_lines, unfinished


def compared_cells(cells: Sequence[Cell], kind: str) -> dict[Point, tuple[Cell, Cell]]:
    """The cells by point, (baseline's, variant's); SearchError unless that is all they are."""
    points: dict[Point, list[Cell]] = {}
    for cell in sorted(cells, key=lambda c: c.variant != BASELINE):
        points.setdefault((int(cell.concurrency or 0), int(cell.config["load"]["repeat"])),
                          []).append(cell)
    variants, workloads = sorted({c.variant for c in cells}), sorted({c.workload for c in cells})
    if (BASELINE not in variants or len(variants) != 2 or len(workloads) != 1
            or any(len(v) != 2 for v in points.values())):
        raise SearchError(f"grid.search.kind={kind} compares one variant with the baseline "
                          f"on one workload; the grid has variants {', '.join(variants)} and "
                          f"workloads {', '.join(workloads)} "
                          f"({max(len(v) for v in points.values())} cells per load)")
    return {p: (pair[0], pair[1]) for p, pair in points.items()}


class CrossoverPlanned(Planned):
    """A crossover search planned for one run: its space and the cells of every point."""

    kind = "crossover"
    reserve = 0
    """Cells of the budget kept for a confirmation."""

    def __init__(self, space: Space, points: dict[Point, tuple[Cell, Cell]]) -> None:
        self.space, self.points = space, points
        self.max_cells = space.max_cells
        self.variant, self.workload = self.variant_cell.variant, self.variant_cell.workload
        self.prior: tuple[str, str, tuple[float, ...]] | None = None
        """(the twin's file, its label, the speedup it predicts at each lattice level): the
        twin asked first (grid.search.prior), whose crossover chose the first levels."""

    def with_prior(self, path: str | None, workloads: WorkloadPlan) -> CrossoverPlanned:
        if path is not None:
            base, variant = self.points[(self.space.lattice[0], 0)]
            file, label, predicted = search.ask_twin(path, base, variant, self.space.lattice,
                                                     workloads)
            self.prior = (str(file), label, predicted)
            self.space = dataclasses.replace(
                self.space, first=prior_levels(self.space.lattice, predicted), prior=label)
        return self

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        measured = compared_points(run_dir, self.points, slo)
        return list(replay(self.space, measured)), set(measured)

    def cells_at(self, point: Sequence[int]) -> tuple[Cell, Cell]:
        return self.points[(point[0], point[1])]

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        cells = [c for p in sorted(points) for c in self.cells_at(p)]
        lead = first if first is not None else BASELINE
        return sorted(cells, key=lambda c: c.variant != lead)

    def first_step(self) -> CrossoverStep:
        """The crossover search's first step, within the budget less the reserve."""
        return next_step(dataclasses.replace(
            self.space, max_cells=self.space.max_cells - self.reserve), {})

    def first_points(self) -> list[Any]:
        return list(self.first_step().points)

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(self.points)][1]

    describe = staticmethod(describe)

    def head(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind, "baseline": BASELINE, "variant": self.variant,
                               "workload": self.workload, "load_kind": "concurrency"}
        if self.prior:
            path, label, predicted = self.prior
            out["prior"] = {"path": path, "source": label, "predicted": {
                str(c): round(v, 4) for c, v in zip(self.space.lattice, predicted, strict=True)}}
        return out

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        crossing = [s for s in steps if isinstance(s, CrossoverStep)]
        res = result(self.space, crossing)
        if self.prior is not None:
            path, label, predicted = self.prior
            res["prior"] = {"source": label, "path": path, **prior_check(
                self.space.lattice, predicted, crossing[-1].speedups)}
        return {**self.head(), "result": {**res, "note": note},
                "steps": [s.as_json() for s in steps]}

    def plan_lines(self) -> list[str]:
        space, first = self.space, self.first_step()
        lines = [
            f"search: {self.kind} of {self.variant} vs {BASELINE} on {self.workload}, "
            f"concurrency {space.lattice[0]}..{space.lattice[-1]}",
            f"  lattice ({len(space.lattice)} levels): {' '.join(map(str, space.lattice))}; "
            f"coarse levels {' '.join(map(str, space.coarse))}; up to {space.max_repeats} "
            "repeat(s) of a level whose interval straddles 0",
            f"  budget: grid.search.max_cells={space.max_cells} (a dense grid of this lattice: "
            f"{len(space.lattice) * 2} cells)",
            first_step_line(first.why, len(first.points) * space.cells_per_point),
        ]
        if self.prior:
            shown = ", ".join(f"c={c} {v:+.0%}" for c, v in zip(
                space.lattice, self.prior[2], strict=True))
            lines.insert(3, f"  prior: {self.prior[1]} predicts the speedup {shown}")
        return lines


def bracket_text(bracket: list) -> str:
    low, high = bracket
    if low is None and high is None:
        return "not yet"
    if high is None:
        return f"pays up to c={low}"
    if low is None:
        return f"stops paying at c={high}"
    return f"between c={low} and c={high}"


def trace_lines(trace: dict, points: Callable[[Sequence[int]], str] = describe) -> list[str]:
    """The steps (their points in the words of `points`) and the outcome."""
    res = trace["result"]
    lines = [f"search: {trace.get('kind', 'crossover')} of {trace['variant']} vs "
             f"{trace['baseline']} on {trace['workload']}, {res['cells']} of "
             f"{res['max_cells']} cells (lattice {res['lattice'][0]}..{res['lattice'][-1]})"]
    lines += step_lines(trace["steps"], points)
    lines.append(f"  stopped: {res['stop']} ({res['stop_meaning']}); crossover "
                 f"{bracket_text(res['bracket'])}" if res.get("stop") else unfinished(res))
    prior = res.get("prior")
    if not prior:
        return lines
    # what the twin asked first predicted, against what the search then measured
    low, high = prior["predicted_bracket"]
    said = (f"the crossover {bracket_text([low, high])}" if low is not None and high is not None
            else f"that speculation {bracket_text([low, high])}")
    lines.append(f"  prior: {prior['source']} predicted {said}; the search measured there first")
    rows = [f"c={r['load']} predicted {r['predicted']:+.1%}, measured {r['measured']:+.1%} "
            f"[{r['interval'][0]:+.1%}, {r['interval'][1]:+.1%}]"
            + ("" if r["inside"] else " (outside)") for r in prior["levels"]]
    if rows:
        lines.append(f"    at the measured levels: {'; '.join(rows)}; mean |error| "
                     f"{100 * prior['mean_abs_error']:.1f} points of speedup")
    return lines


class Crossover(Question):
    kind = "crossover"
    lines = staticmethod(trace_lines)

    def answer(self, trace: dict) -> str | None:
        """Where the variant stops paying, as the search bracketed it."""
        res = trace["result"]
        if not res.get("stop"):
            return None
        return (f"{trace['variant']} vs {trace['baseline']} on {trace['workload']}: the "
                f"crossover search ({res['cells']} cells) finds speculation "
                f"{bracket_text(res['bracket'])}")

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        return search.with_repeats(cells, workloads, search.search_space(cfg)), None

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        planned = CrossoverPlanned(search.search_space(cfg), compared_cells(cells, self.kind))
        return planned.with_prior(cfg.grid.search.prior, workloads)


QUESTION = Crossover()
