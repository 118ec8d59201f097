"""What is the highest load at which the variant meets the SLOs? (`grid.search.kind=capacity`,
docs/questions.md): the report's capacity (grid/analysis/capacity.py) found with a few cells on
the load lattice instead of a dense grid: bracket, then bisect on whether each load holds the
SLOs (its attainment's interval and point estimate; steps.py, pure). The whole question is
this folder: plan, run and the report's lines here, steps in steps.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.analysis.capacity import ATTAINMENT, Attainment, cell_attainments, fewest_to_meet
from grid.analysis.search import Space
from grid.plan.cells import Cell
from grid.plan.search import SearchError, search_space
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.capacity.steps import next_step, replay, result
from grid.questions.measure import analysed
from grid.questions.steps import step_lines, unfinished


def _c(load: int | None) -> str:
    return "none" if load is None else f"c={load}"


def _found(trace: dict) -> str:
    res = trace["result"]
    low, top = res["interval"]
    cap, miss = res["capacity"], res["first_miss"]
    if res.get("undetermined"):
        head = ("has an undetermined capacity: no load searched is shown to meet the SLOs "
                f"(their point estimates hold up to c={cap})")
    elif cap is None:
        head = "holds the SLOs at no load searched"
    elif res["stop"] == "all served":
        head = f"serves at least c={cap} within the SLOs, the highest searched (not bracketed)"
    else:
        head = f"serves up to c={cap} within the SLOs"
    if res.get("point_estimate") and not res.get("undetermined"):
        head += (f" by its point estimate alone (c={cap} is undecided; shown to meet them up "
                 f"to c={low})")
    notes = [f"undecided at {', '.join(_c(x) for x in res['undecided'])}"] if res[
        "undecided"] else []
    if res["unmeasured"]:
        notes.append(f"{res['unmeasured']} of its loads not measured")
    span = f"interval {_c(low)} .. {_c(top)}" + "".join(f", {n}" for n in notes)
    where = f"c={miss} misses them" if miss is not None else "no load searched misses them"
    cliff = (f"; a cliff: c={miss} serves {res['attainment'][str(miss)]['attainment']:.0%} of "
             "requests within the SLOs" if res["cliff"] else "")
    return f"{head} ({span}; {where}){cliff}"


def _measured(res: dict) -> str:
    parts = []
    for load, a in res["attainment"].items():
        lo, hi = a["interval"]
        value = "-" if a["attainment"] is None else f"{a['attainment']:.0%}"
        parts.append(f"c={load} {value} [{lo:.0%}, {hi:.0%}] of {a['requests']} {a['verdict']}")
    return "  attainment (95 % interval, steady-window requests): " + "; ".join(parts)


def trace_lines(trace: dict) -> list[str]:
    """One line per step, one with each measured load's attainment, one for the outcome."""
    res = trace["result"]
    lines = [f"search: capacity of {trace['variant']} on {trace['workload']} (SLO attainment "
             f">= {trace['target']:.0%}), {res['cells']} of {res['max_cells']} cells (the "
             f"dense grid: {res['dense_cells']}), lattice {res['lattice'][0]}.."
             f"{res['lattice'][-1]}"]
    lines += step_lines(trace["steps"], lambda p: f"c={p[0]}")
    lines += [_measured(res)] if res["attainment"] else []
    stop, so_far = res.get("stop"), "so far " if res.get("stop") == "budget" else ""
    return [*lines, f"  stopped: {stop}; {so_far}{trace['variant']} {_found(trace)}" if stop
            else unfinished(res)]


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the capacity, with its interval and cliff; where the budget ran
    out before the boundary was bracketed, undetermined, with what it has so far. One repeat
    per load: the attainment's interval is the steady window's requests, within-run noise
    only (said)."""
    res = trace["result"]
    if not res.get("stop"):
        return None
    tail = (f" (the capacity search, {res['cells']} of {res['dense_cells']} cells, one repeat "
            "per load: within-run noise only)")
    if res["stop"] == "budget":
        return (f"{trace['variant']} on {trace['workload']} has an undetermined capacity: "
                f"grid.search.max_cells={res['max_cells']} ran out before the boundary was "
                f"bracketed (a larger one continues the search); so far it {_found(trace)}"
                + tail)
    return f"{trace['variant']} on {trace['workload']} {_found(trace)}{tail}"


class CapacityPlanned(Planned):
    def __init__(self, space: Space, cells: Sequence[Cell], target: float = ATTAINMENT) -> None:
        self.lattice, self.max_cells, self.target = space.lattice, space.max_cells, target
        self.points = {int(c.concurrency or 0): c for c in cells}
        self.attainment: dict[int, Attainment] = {}

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The attainment of each cell committed as done, as the report reads it."""
        stats = analysed(run_dir, self.points.values(), slo, replicates=1)
        values = {} if stats is None else cell_attainments(stats.table)
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
    lines = staticmethod(trace_lines)
    answer = staticmethod(answer_sentence)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        """One variant on one workload, one cell per lattice load (SearchError otherwise)."""
        variants = sorted({c.variant for c in cells})
        names = sorted({c.workload for c in cells})
        if len(variants) != 1 or len(names) != 1:
            raise SearchError(f"grid.search.kind=capacity searches one variant on one "
                              f"workload; the grid has variants {', '.join(variants)} and "
                              f"workloads {', '.join(names)}")
        return CapacityPlanned(search_space(cfg), cells)


QUESTION = Capacity()
