"""Which speculative_disable_above_batch to set? (`grid.search.kind=threshold`, docs/search.md
"The threshold search"): the crossover search with `reserve` cells kept back, then the ranked
candidates confirmed pairwise. The steps are pure, as the crossover search's are."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

import engines
from grid.analysis import Slo
from grid.analysis.decision import crossover_of
from grid.analysis.search import Level, Space, sign
from grid.plan.cells import Cell
from grid.plan.search import SearchError, search_space, with_settings
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned
from grid.questions import steps as shared
from grid.questions.crossover import Crossover, CrossoverPlanned, compared_cells
from grid.questions.crossover import steps as crossover
from grid.questions.crossover import trace_lines as crossover_lines
from grid.questions.measure import Compared, compared_points

CONFIRMED = "confirmed"
THRESHOLD_STOPS = {
    **crossover.STOP_REASONS,
    CONFIRMED: "every pair of top-ranked thresholds was measured where the two differ",
}
Pair = tuple[int, int, int]
"""(lower threshold, higher threshold, repeat index), both at concurrency = the higher."""


def reserve_cells(candidates: int, cells_per_point: int = 2) -> int:
    """Cells kept for the confirmation: one point per adjacent pair of the top `candidates`."""
    return cells_per_point * (candidates - 1)


def describe_point(point: Sequence[int]) -> str:
    """A crossover point's `c=16` or a confirmation pair's `off_above=28 vs 30 at c=30`."""
    if len(point) != 3:
        return crossover.describe(point)
    low, high, repeat = point
    return f"off_above={low} vs {high} at c={high}" + (f" repeat {repeat}" if repeat else "")


@dataclass(frozen=True)
class Candidate:
    value: int
    regret: float
    """Predicted: |integral of the speedup from log2 value to log2 crossover|."""


def rank(levels: Mapping[int, Level], honoured: Sequence[int], low: int, high: int
         ) -> list[Candidate]:
    """The honoured values in [low, high] by predicted regret, smallest (then lowest) first;
    empty without a finite crossover."""
    loads = np.array(sorted(levels), dtype=float)
    if len(loads) < 2:
        return []
    speedup = np.array([levels[int(c)].speedup for c in loads], dtype=float)
    cross = crossover_of(loads, speedup)
    if not math.isfinite(cross):
        return []
    out = []
    for value in sorted({v for v in honoured if low <= v <= high}):
        u = np.linspace(math.log2(value), math.log2(cross), 257)
        s = np.interp(u, np.log2(loads), speedup)
        area = float(np.sum((s[1:] + s[:-1]) / 2 * np.diff(u)))  # trapezoid rule
        out.append(Candidate(value, abs(area)))
    return sorted(out, key=lambda c: (round(c.regret, 12), c.value))


@dataclass(frozen=True)
class ThresholdConfirmStep:
    """One step of the confirmation: pairs to measure (or why it stops)."""

    number: int
    points: tuple[Pair, ...]
    why: str
    stop: str | None
    candidates: tuple[Candidate, ...]
    """Ranked, best first (the top ones are confirmed)."""
    threshold: int | None
    """The recommended speculative_disable_above_batch so far (None: none needed)."""
    cells_before: int
    signs: dict[str, str] = field(default_factory=dict)
    """Each measured pair's sign, keyed `T1->T2` (+: the higher threshold wins)."""
    phase: str = "confirm"

    def as_json(self) -> dict:
        return {**asdict(self), "points": [list(p) for p in self.points],
                "candidates": _candidates(self.candidates[:5])}  # the full ranking: the result's


def _candidates(ranked: Sequence[Candidate]) -> list[dict]:
    return [{"value": c.value, "regret": round(c.regret, 6)} for c in ranked]


def winner(top: Sequence[int], signs: Mapping[str, str]) -> int:
    """Walk up the sorted top values while each pair says the higher one wins."""
    best = top[0]
    for a, b in zip(top, top[1:], strict=False):
        if not signs.get(f"{a}->{b}", "").startswith("+"):
            break
        best = b
    return best


def confirm_step(space: Space, last: crossover.CrossoverStep, levels: Mapping[int, Level],
                 honoured: Sequence[int], candidates: int,
                 measured: Mapping[tuple[int, int], Level], used: int, number: int
                 ) -> ThresholdConfirmStep:
    """The next confirmation step after the crossover search stopped (`last`)."""
    if last.stop in (crossover.BELOW_RANGE, crossover.ABOVE_RANGE):
        value = 0 if last.stop == crossover.BELOW_RANGE else None
        return ThresholdConfirmStep(number, (), f"{last.why}: nothing to rank",
                                    last.stop, (), value, used)
    ranked = tuple(rank(levels, honoured, space.lattice[0], space.lattice[-1]))
    if not ranked:
        return ThresholdConfirmStep(number, (), "no finite crossover among the measured "
                                    "levels: nothing to rank", crossover.BUDGET, (), None, used)
    top = sorted(c.value for c in ranked[:candidates])
    pairs = list(zip(top, top[1:], strict=False))
    signs = {f"{a}->{b}": sign(measured[(a, b)], space.max_repeats, space.min_effect)
             for a, b in pairs if (a, b) in measured}
    best = winner(top, signs)
    names = ", ".join(f"{c.value} ({c.regret:.3f})" for c in ranked[:candidates])
    todo: list[Pair] = []
    for a, b in pairs:
        if (a, b) not in measured:
            todo.append((a, b, 0))
        elif signs[f"{a}->{b}"] == "?":
            level = measured[(a, b)]
            more = min(space.points_per_step, space.max_repeats - level.repeats)
            todo += [(a, b, level.repeats + i) for i in range(more)]
    if not todo:
        return ThresholdConfirmStep(number, (), f"top candidates {names}: every pair decided, "
                                    f"set speculative_disable_above_batch={best}", CONFIRMED,
                                    ranked, best, used, signs)
    points, why, stop = shared.fit(
        todo, (space.max_cells - used) // space.cells_per_point,
        f"top candidates by predicted regret {names}: measure "
        + ", ".join(describe_point(p) for p in todo),
        f"{crossover.STOP_REASONS[crossover.BUDGET]} ({used} of {space.max_cells} cells)")
    return ThresholdConfirmStep(number, points, why, stop, ranked, best, used, signs)


def replay_threshold(space: Space, reserve: int, honoured: Sequence[int], candidates: int,
                     measured: Mapping[crossover.Point, Compared],
                     confirmed: Mapping[Pair, Compared]
                     ) -> list[crossover.CrossoverStep | ThresholdConfirmStep]:
    """Every step of a threshold search: the crossover search within max_cells - reserve, then
    the confirmation's."""
    crossing = crossover.replay(replace(space, max_cells=space.max_cells - reserve), measured)
    last = crossing[-1]
    if last.stop is None:
        return list(crossing)
    levels = crossover.level_speedups(measured, {p for s in crossing for p in s.points})
    used = sum(lv.repeats for lv in levels.values()) * space.cells_per_point

    def step_after(chosen: set[Pair], number: int) -> ThresholdConfirmStep:
        # per pair (T1, T2), the higher threshold's speedup over the lower's
        by_pair: dict[tuple[int, int], dict[crossover.Point, Compared]] = {}
        for a, b, r in chosen:
            if (a, b, r) in confirmed:
                by_pair.setdefault((a, b), {})[(b, r)] = confirmed[(a, b, r)]
        done = {pair: crossover.level_speedups(points, points)[pair[1]]
                for pair, points in by_pair.items()}
        spent = used + sum(lv.repeats for lv in done.values()) * space.cells_per_point
        return confirm_step(space, last, levels, honoured, candidates, done, spent, number)

    return [*crossing, *shared.replay(step_after, confirmed, len(crossing) + 1)]


def threshold_result(steps: Sequence[crossover.CrossoverStep | ThresholdConfirmStep]) -> dict:
    """The threshold part of the trace's result (empty while the crossover search runs)."""
    last = steps[-1]
    if not isinstance(last, ThresholdConfirmStep):
        return {}
    return {"threshold": last.threshold, "threshold_stop": last.stop,
            "threshold_stop_meaning": THRESHOLD_STOPS.get(last.stop or ""),
            "cells": last.cells_before, "candidates": _candidates(last.candidates)}


def honoured_values(cell: Cell, hardware: str | None) -> tuple[int, ...]:
    """The thresholds the variant's engine tells apart; SearchError when it has none."""
    variant = cell.config["variant"]
    engine_name = cell.config["engine"]["name"]
    if variant.get("speculative_disable_above_batch") is not None:
        raise SearchError("grid.search.kind=threshold sets speculative_disable_above_batch "
                          f"itself; variant {variant['name']} already sets it")
    try:
        values = engines.get(engine_name).threshold_values(variant, hardware)
    except ValueError as e:
        raise SearchError(f"grid.search.kind=threshold: {e}") from None
    if not values:
        raise SearchError(f"grid.search.kind=threshold: engine {engine_name} cannot switch "
                          f"speculation off by batch size for variant {variant['name']}")
    return tuple(values)


class ThresholdPlanned(CrossoverPlanned):
    kind = "threshold"

    def __init__(self, space: Space, points: dict[crossover.Point, tuple[Cell, Cell]],
                 honoured: tuple[int, ...], candidates: int) -> None:
        super().__init__(space, points)
        self.honoured = honoured
        """The values the engine tells apart (Engine.threshold_values), ascending."""
        self.candidates = candidates
        """Top-ranked values confirmed (grid.search.candidates)."""
        self.reserve = reserve_cells(candidates)

    def pair_cells(self, pair: Sequence[int]) -> tuple[Cell, Cell]:
        """A confirmation point's cells: the variant with each threshold, both at the higher."""
        low, high, repeat = pair
        template = self.points[(self.space.lattice[0], repeat)][1]
        low_cell, high_cell = (with_settings(template, {
            "variant.speculative_disable_above_batch": value, "load.concurrency": high})
            for value in (low, high))
        return low_cell, high_cell

    def cells_at(self, point: Sequence[int]) -> tuple[Cell, Cell]:
        return self.pair_cells(point) if len(point) == 3 else super().cells_at(point)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        measured = compared_points(run_dir, self.points, slo)

        def steps_with(confirmed: dict[Pair, Any]) -> list[Any]:
            return list(replay_threshold(self.space, self.reserve, self.honoured,
                                         self.candidates, measured, confirmed))

        # The first replay names the pairs; every repeat of them is read for the second.
        steps = steps_with({})
        pairs = {(a, b, r) for a, b, _ in (p for p in steps[-1].points if len(p) == 3)
                 for r in range(self.space.max_repeats)}
        if not pairs:
            return steps, set(measured)
        confirmed = compared_points(run_dir, {p: self.pair_cells(p) for p in pairs}, slo)
        return steps_with(confirmed), set(measured) | set(confirmed)

    describe = staticmethod(describe_point)

    def head(self) -> dict:
        return {**super().head(), "honoured": list(self.honoured),
                "candidates": self.candidates}

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        trace = super().trace(steps, note)
        trace["result"].update(threshold_result(steps))
        return trace

    def stop_line(self, steps: Sequence[Any]) -> str:
        last = steps[-1]
        return (f"; set speculative_disable_above_batch={last.threshold}"
                if isinstance(last, ThresholdConfirmStep) and last.threshold is not None else "")

    def plan_lines(self) -> list[str]:
        lines = super().plan_lines()
        lattice = self.space.lattice
        inside = [v for v in self.honoured if lattice[0] <= v <= lattice[-1]]
        shown = " ".join(str(v) for v in inside[:12]) + (
            f" ... {inside[-1]}" if len(inside) > 12 else "")
        lines.insert(3, f"  then: the {len(inside)} speculative_disable_above_batch values the "
                     f"engine tells apart in the range ({shown}) ranked by predicted regret; the "
                     f"top {self.candidates} confirmed where they differ ({self.reserve} of the "
                     "cells kept for it)")
        return lines


def _value_text(value: int | None, short: bool = False) -> str:
    """What to set, in the report's sentence or (`short`) the terminal line."""
    return (f"no threshold needed within the {'' if short else 'searched '}range" if value is None
            else f"keep speculation off ({'' if short else 'speculative_disable_above_batch='}0)"
            if value == 0 else f"set speculative_disable_above_batch={value}")


def trace_lines(trace: dict, points: Callable[[Sequence[int]], str] = describe_point
                ) -> list[str]:
    """The crossover search's lines, then the confirmed threshold once it stopped."""
    res = trace["result"]
    lines = crossover_lines(trace, points)
    if not res.get("threshold_stop"):
        return lines
    return [*lines, f"  threshold: {_value_text(res.get('threshold'), short=True)} "
            f"({res['threshold_stop']}: {res['threshold_stop_meaning']})"]


class Threshold(Crossover):
    kind = "threshold"
    lines = staticmethod(trace_lines)

    def answer(self, trace: dict) -> str | None:
        """The confirmed value and why the confirmation stopped."""
        res = trace["result"]
        if not res.get("threshold_stop"):
            return None
        return (f"{trace['variant']} on {trace['workload']}: {_value_text(res.get('threshold'))} "
                f"(the threshold search's choice after {res['cells']} cells: "
                f"{res['threshold_stop']})")

    def recommendations(self, recs: list[dict], trace: dict) -> list[dict]:
        """The confirmed value in place of the crossover rule's (kept as `crossover_rule`)."""
        res = trace["result"]
        if not res.get("threshold_stop"):
            return recs
        value = res.get("threshold")
        signs: dict[str, str] = next((s.get("signs") for s in reversed(trace["steps"])
                                      if s.get("phase") == "confirm" and s.get("signs")), {})
        measured = "; ".join(
            f"{pair.replace('->', ' vs ')}: {'higher' if sign.startswith('+') else 'lower'} wins"
            + ("" if sign in ("+", "-") else " (point estimate)") for pair, sign in signs.items())
        key = (trace["variant"], trace["workload"])
        old = next((r for r in recs if (r["variant"], r["workload"]) == key), None)
        rule = None if old is None else old.get("speculative_disable_above_batch")
        statement = (f"{_value_text(value)}: the threshold search's choice "
                     f"({res['threshold_stop']}" + (f"; {measured}" if measured else "") + ")"
                     + (f"; the crossover rule alone says {rule}" if rule != value else ""))
        new = {**(old or {"variant": key[0], "workload": key[1]}),
               "speculative_disable_above_batch": value, "statement": statement,
               "source": "threshold search", "crossover_rule": rule}
        return [new if r is old else r for r in recs] + ([] if old is not None else [new])

    def check(self, cfg: DictConfig) -> None:
        reserve = reserve_cells(int(cfg.grid.search.candidates))
        if int(cfg.grid.search.max_cells) < reserve + 4:
            raise SearchError(f"grid.search.max_cells={cfg.grid.search.max_cells} leaves the "
                              f"crossover search fewer than 4 cells after the {reserve} kept "
                              f"for confirming {cfg.grid.search.candidates} candidates")
        super().check(cfg)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        points = compared_cells(cells, self.kind)
        honoured = honoured_values(points[min(points)][1],
                                   OmegaConf.select(cfg, "hardware.name", default=None))
        planned = ThresholdPlanned(search_space(cfg), points, honoured,
                                   int(cfg.grid.search.candidates))
        return planned.with_prior(cfg.grid.search.prior, workloads)


QUESTION = Threshold()
