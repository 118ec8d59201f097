"""The threshold search's steps (docs/search.md "The threshold search"), pure: the crossover
search with `reserve` cells kept back, then the ranked candidates confirmed pairwise."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from grid.analysis.decision import crossover_of
from grid.analysis.search import Level, Space, sign
from grid.questions import steps as shared
from grid.questions.crossover import steps as crossover
from grid.questions.measure import Compared

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
    x = np.log2(loads)
    out = []
    for value in sorted({v for v in honoured if low <= v <= high}):
        u = np.linspace(math.log2(value), math.log2(cross), 257)
        s = np.interp(u, x, speedup)
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
        out = asdict(self)
        out["points"] = [list(p) for p in self.points]
        out["candidates"] = [{"value": c.value, "regret": round(c.regret, 6)}
                             for c in self.candidates[:5]]  # the full ranking: the result's
        return out


def pair_levels(measured: Mapping[Pair, Compared], chosen: set[Pair]
                ) -> dict[tuple[int, int], Level]:
    """Per pair (T1, T2), the higher threshold's speedup over the lower's."""
    by_pair: dict[tuple[int, int], dict[crossover.Point, Compared]] = {}
    for a, b, r in chosen:
        if (a, b, r) in measured:
            by_pair.setdefault((a, b), {})[(b, r)] = measured[(a, b, r)]
    return {pair: crossover.level_speedups(points, points)[pair[1]]
            for pair, points in by_pair.items()}


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
        done = pair_levels(confirmed, chosen)
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
            "cells": last.cells_before,
            "candidates": [{"value": c.value, "regret": round(c.regret, 6)}
                           for c in last.candidates]}
