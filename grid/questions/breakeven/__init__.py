"""Which accept length breaks even? (`grid.search.kind=breakeven`, docs/search.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from engines.forced import speculative_steps
from grid.analysis import Slo
from grid.analysis.forced import FORCED_LABEL
from grid.plan import search
from grid.plan.cells import Cell
from grid.plan.search import BASELINE, SearchError
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.breakeven.steps import BASELINE as BASELINE_INDEX
from grid.questions.breakeven.steps import BreakevenSpace, chosen, describe, next_step, replay
from grid.questions.measure import point_throughputs
from grid.questions.steps import first_step_line, step_lines, unfinished


class BreakevenPlanned(Planned):
    """A break-even search planned for one run: its space and the cell of every point."""

    def __init__(self, space: BreakevenSpace, cells: Sequence[Cell]) -> None:
        self.space, self.max_cells = space, space.max_cells
        self.points: dict[tuple[int, int], Cell] = {}
        for cell in cells:
            length = (cell.config["variant"].get("forced_acceptance") or {}).get("length")
            self.points[(int(cell.concurrency or 0), BASELINE_INDEX if length is None
                         else space.lengths.index(float(length)))] = cell
        self.variant = str(self.variant_cell.config["variant"]["name"])
        self.workload = self.variant_cell.workload

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(p for p in self.points if p[1] != BASELINE_INDEX)]

    def describe(self, point: Sequence[int]) -> str:
        return describe(point, self.space.lengths)

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
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
        last, space = steps[-1].as_json(), self.space
        return {"kind": "breakeven", "baseline": BASELINE, "variant": self.variant,
                "workload": self.workload, "load_kind": "concurrency",
                "loads": list(space.loads), "lengths": list(space.lengths),
                "result": {"stop": last["stop"], "cells": len(chosen(steps)),
                           "max_cells": space.max_cells, "dense_cells": space.dense_cells,
                           "brackets": last["brackets"], "note": note},
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


def _brackets(res: dict) -> str:
    return "; ".join(
        f"c={c} " + (f"between {lo:g} and {hi:g}" if where == "inside" else
                     f"at or below {hi:g}" if where == "below" else f"at or above {lo:g}")
        for c, (lo, hi, where) in res["brackets"].items())


def trace_lines(trace: dict) -> list[str]:
    """A break-even search's steps and outcome."""
    res = trace["result"]
    lines = [f"search: break-even of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']} ({FORCED_LABEL}), {res['cells']} of {res['max_cells']} "
             f"cells (the dense grid: {res['dense_cells']}), loads "
             f"{trace['loads'][0]}..{trace['loads'][-1]}"]
    lines += step_lines(trace["steps"], lambda p: describe(p, trace["lengths"]))
    return [*lines, f"  stopped: {res['stop']}; break-even {_brackets(res)}" if res.get("stop")
            else unfinished(res)]


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the break-even curve, load by load."""
    res = trace["result"]
    if not res.get("stop"):
        return None
    return (f"{trace['variant']} vs {trace['baseline']} on {trace['workload']}: speculation "
            f"breaks even at an accept length {_brackets(res)} (the break-even search, "
            f"{res['cells']} of {res['dense_cells']} dense cells, {FORCED_LABEL})")


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
        """The baseline's cells and the variant's per forced length; the context: the space."""
        search.check_one_against_baseline(cells, "breakeven compares one speculative variant")
        own = next(c for c in cells if c.config["variant"]["name"] != BASELINE).config["variant"]
        steps = speculative_steps(own.get("args") or {})
        if steps is None:
            raise SearchError(f"grid.search.kind=breakeven: variant {own['name']} does not "
                              "speculate: there is no acceptance to force")
        if any(dict(own.get("forced_acceptance") or {}).values()):
            raise SearchError("grid.search.kind=breakeven sets variant.forced_acceptance "
                              f"itself; variant {own['name']} already sets it")
        lengths = search.breakeven_lengths(cfg, steps)
        space = search.search_space(cfg)
        out = search.with_twins(cells, workloads, search.LENGTH_KEY, lengths,
                         keep=lambda c: c.config["variant"]["name"] == BASELINE)
        return out, BreakevenSpace(space.lattice, lengths, space.max_cells)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        return BreakevenPlanned(context, cells)

QUESTION = Breakeven()
