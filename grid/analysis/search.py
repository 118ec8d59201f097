"""Adaptive search for the crossover (`grid.search.kind=crossover`, docs/search.md): where a
speculative variant stops paying against the baseline, with as few cells as the question needs.

Pure: the next step is a function of the measured points only (no Ray, no files), so a run that
crashed replays the same steps from its committed cells and a finished search measures nothing
new. Loads live on a lattice: the range's lower end times the resolution factor to the k-th
power, rounded to whole streams, so every cell the search may choose is one a dense grid of the
same factor would hold. A point is (load, repeat index); each point is one cell per variant.

One step, from the levels measured so far (speedup = variant / baseline - 1 over the level's
repeats, with its 95 % bootstrap interval, as grid/analysis/decision.py computes it):

1. coarse: the coarse levels (log-spaced over the range) up to the range's geometric middle,
   cheapest first (a cell's requests grow with its concurrency); with a prior
   (`grid.search.prior`, a twin's predictions: `prior_levels`) the levels around its
   predicted crossover instead;
2. each measured level gets a sign: `+` (interval above 0), `-` (below 0), `?` (straddles 0
   wider than ±min_effect, with fewer than max_repeats repeats) or, with max_repeats spent or
   the interval within ±min_effect, the sign of its point estimate (as decision.crossover_of
   reads it);
3. the crossover is where it first stops paying: j = the lowest `-` level, i = the highest `+`
   below it. `?` levels that decide where i or j lie get one more repeat each; with no `-` the
   search climbs to the next coarse level (stop `above_range` at the top); with no `+` below
   the lowest measured level it descends to the next coarse level below it, and stops
   `below_range` once that is the range's lowest; else it stops `bracketed` when i and j are
   neighbours on the lattice, or bisects: the lattice level nearest the geometric mean of i, j
   (with points_per_step k > 1: k levels evenly spaced in log between them, and up to k
   repeats at once of an undecided level).

The budget (max_cells) is checked before every step: a step that does not fit whole runs the
points that fit, and the search stops `budget` once nothing more fits."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from grid.analysis.bootstrap import interval
from grid.analysis.repeats import RepeatNoise, combine, pooled

BRACKETED = "bracketed"
BELOW_RANGE = "below_range"
ABOVE_RANGE = "above_range"
BUDGET = "budget"
STOP_REASONS = {
    BRACKETED: "the crossover is bracketed between neighbouring levels of the lattice",
    BELOW_RANGE: "speculation does not pay even at the lowest load of the range",
    ABOVE_RANGE: "speculation pays at every load up to the highest of the range",
    BUDGET: "grid.search.max_cells is spent before the crossover was bracketed",
}
"""Why a search stopped (docs/search.md)."""

Point = tuple[int, int]
"""(load, repeat index): one cell per compared variant."""


@dataclass(frozen=True)
class Space:
    """What a search may measure and spend."""

    lattice: tuple[int, ...]
    """Every load the search may choose, ascending."""
    coarse: tuple[int, ...]
    """The coarse levels, a subset of the lattice (its ends included)."""
    max_cells: int
    max_repeats: int
    """Repeats of one level at most (repeat indices 0 .. max_repeats - 1)."""
    min_effect: float = 0.0
    """A level whose interval straddles 0 but lies within ±min_effect is a tie: its point
    estimate's sign decides at once (a repeat would narrow an interval that already says the
    speedup is too small to matter); only wider intervals get repeats."""
    points_per_step: int = 1
    """Bisection places up to this many levels per step (evenly in log load between the
    bracket's ends: a k-section) and an undecided level gets up to this many repeats at once:
    more cells per step, fewer steps (each step starts each variant's server once)."""
    cells_per_point: int = 2
    """Cells one point costs: the baseline and the compared variant."""
    first: tuple[int, ...] = ()
    """Levels measured first instead of the coarse ones (a prior's `prior_levels`); empty:
    the coarse levels."""
    prior: str | None = None
    """Where `first` comes from, in words (`twin of RUN`), for the steps' reasons."""


def lattice(low: int, high: int, factor: float) -> tuple[int, ...]:
    """low x factor^k rounded to whole streams, for k = 0, 1, ... up to high (high included),
    without duplicates: (1, 256, √2) -> 1 2 3 4 6 8 11 16 23 32 45 64 91 128 181 256."""
    if not (1 <= low < high) or not factor > 1:
        raise ValueError(f"a lattice needs 1 <= low < high and factor > 1, got {low}, {high}, "
                         f"{factor}")
    steps = math.ceil(math.log(high / low) / math.log(factor) - 1e-9)
    levels = {min(high, round(low * factor ** k)) for k in range(steps + 1)}
    return tuple(sorted(levels | {low, high}))


def nearest(levels: Sequence[int], target: float) -> int:
    """The level nearest `target` in log load (the lower one on a tie: it is cheaper)."""
    return min(levels, key=lambda v: (abs(math.log(v / target)), v))


def coarse_levels(grid: Sequence[int], count: int) -> tuple[int, ...]:
    """`count` levels log-spaced over the lattice's span, snapped to it (ends included)."""
    low, high = grid[0], grid[-1]
    count = min(count, len(grid))
    picks = {nearest(grid, low * (high / low) ** (k / (count - 1))) for k in range(count)}
    return tuple(sorted(picks))


def make_space(low: int, high: int, factor: float, coarse: int, max_cells: int,
               max_repeats: int, points_per_step: int = 1, min_effect: float = 0.0,
               cells_per_point: int = 2) -> Space:
    grid = lattice(low, high, factor)
    return Space(grid, coarse_levels(grid, coarse), max_cells, max_repeats, min_effect,
                 points_per_step, cells_per_point)


@dataclass(frozen=True)
class Measured:
    """One point's throughputs (baseline, variant) with their bootstrap replicates."""

    base: float
    variant: float
    base_reps: np.ndarray = field(repr=False)
    variant_reps: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Level:
    """The speedup at one load over its measured repeats."""

    load: int
    repeats: int
    speedup: float
    lo: float
    hi: float


def level(load: int, base: Sequence[tuple[float, np.ndarray]],
          variant: Sequence[tuple[float, np.ndarray]], noise: RepeatNoise, key: str = ""
          ) -> Level:
    """The speedup at one load from each side's repeats, (value, replicates) each: the mean
    variant over the mean baseline, each side's replicates combined over its repeats
    (grid/analysis/repeats.py `pooled_t`: the spread between repeats widens them, as in
    grid/analysis/decision.py)."""
    base_value = float(np.mean([v for v, _ in base]))
    var_value = float(np.mean([v for v, _ in variant]))
    b = combine([v for v, _ in base], [r for _, r in base], "pooled_t", noise,
                f"{key}:{load}:base")
    v = combine([v for v, _ in variant], [r for _, r in variant], "pooled_t", noise,
                f"{key}:{load}:variant")
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = interval(v / b - 1.0)
    return Level(load, min(len(base), len(variant)),
                 var_value / base_value - 1.0 if base_value else math.nan, lo, hi)


def level_speedups(measured: Mapping[Point, Measured], points: Iterable[Point]
                   ) -> dict[int, Level]:
    """Per load, the speedup over the given points' repeats (`level`), the between-repeat
    noise pooled over every load's baseline and variant repeats."""
    by_load: dict[int, list[Measured]] = {}
    for point in sorted(set(points)):
        if point in measured:
            by_load.setdefault(point[0], []).append(measured[point])
    noise = pooled([[m.base for m in ms] for ms in by_load.values()]
                   + [[m.variant for m in ms] for ms in by_load.values()])
    return {load: level(load, [(m.base, m.base_reps) for m in ms],
                        [(m.variant, m.variant_reps) for m in ms], noise)
            for load, ms in by_load.items()}


@dataclass(frozen=True)
class Step:
    """One decision of the search: what to measure next (or why it stops)."""

    number: int
    points: tuple[Point, ...]
    """Points to measure in this step (empty when it stops)."""
    why: str
    stop: str | None
    """None, or one of STOP_REASONS."""
    bracket: tuple[int | None, int | None]
    """(highest level where it pays, lowest where it stops paying) as known before the step;
    None = not found (below / above the measured levels)."""
    cells_before: int
    """Cells the search had measured before this step."""
    signs: dict[int, str] = field(default_factory=dict)
    """Each measured level's sign before the step: + - ? (or +p -p: by the point estimate)."""
    speedups: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    """Each measured level's speedup and its interval (lo, hi) before the step."""
    phase: str = "crossover"
    """`crossover`; a threshold search's confirmation steps are `confirm`
    (grid/analysis/threshold.py)."""

    def as_json(self) -> dict:
        out = asdict(self)
        out["points"] = [list(p) for p in self.points]
        out["bracket"] = list(self.bracket)
        out["signs"] = {str(k): v for k, v in self.signs.items()}
        out["speedups"] = {str(k): [round(x, 4) for x in v] for k, v in self.speedups.items()}
        return out


def sign(level: Level, max_repeats: int, min_effect: float = 0.0) -> str:
    if level.lo > 0:
        return "+"
    if level.hi < 0:
        return "-"
    tie = -min_effect <= level.lo and level.hi <= min_effect  # narrow: too small to matter
    if level.repeats < max_repeats and not tie:
        return "?"
    # repeats spent, or a tie: the point estimate decides
    return "+p" if level.speedup > 0 else "-p"


def _fmt(loads: Iterable[int]) -> str:
    return ", ".join(f"c={c}" for c in loads)


def next_step(space: Space, levels: Mapping[int, Level], number: int = 1) -> Step:
    """The search's next step from the levels measured so far (module docstring)."""
    used = sum(lv.repeats for lv in levels.values()) * space.cells_per_point
    signs = {c: sign(levels[c], space.max_repeats, space.min_effect) for c in sorted(levels)}
    seen = {c: (levels[c].speedup, levels[c].lo, levels[c].hi) for c in sorted(levels)}
    pays = [c for c, s in signs.items() if s.startswith("+")]
    loses = [c for c, s in signs.items() if s.startswith("-")]
    first_loss = loses[0] if loses else None
    below = [c for c in pays if first_loss is None or c < first_loss]
    last_pay = below[-1] if below else None
    bracket = (last_pay, first_loss)

    def step(points: list[Point], why: str, stop: str | None = None) -> Step:
        if stop is None:  # the budget: as many of the points as fit
            fit = max(0, (space.max_cells - used) // space.cells_per_point)
            if fit == 0:
                return Step(number, (), f"{why}: not measured, {STOP_REASONS[BUDGET]} "
                            f"({used} of {space.max_cells} cells)", BUDGET, bracket, used,
                            signs, seen)
            if fit < len(points):
                why += f" (only {fit} of {len(points)} point(s) fit the budget)"
                points = points[:fit]
        return Step(number, tuple(points), why, stop, bracket, used, signs, seen)

    middle = math.sqrt(space.lattice[0] * space.lattice[-1])
    if space.first:
        todo = [c for c in space.first if c not in levels]
        if todo:
            return step([(c, 0) for c in todo], f"the levels the prior ({space.prior}) "
                        f"points to: {_fmt(todo)}")
    else:
        coarse = [c for c in space.coarse if c <= middle * (1 + 1e-9) and c not in levels]
        if coarse:
            return step([(c, 0) for c in coarse],
                        f"coarse levels up to the range's geometric middle: {_fmt(coarse)}")
    # `?` levels that decide the bracket: above the last level where it pays, below the
    # first where it stops paying (all above the last paying level if none stops).
    open_ = [c for c, s in signs.items() if s == "?" and (last_pay is None or c > last_pay)
             and (first_loss is None or c < first_loss)]
    if open_:
        more = {c: min(space.points_per_step, space.max_repeats - levels[c].repeats)
                for c in open_}
        what = ("one more repeat each" if max(more.values()) == 1
                else f"up to {max(more.values())} more repeats each")
        return step([(c, levels[c].repeats + i) for c in open_ for i in range(more[c])],
                    f"interval straddles 0 at {_fmt(open_)}: {what}")
    if first_loss is None:
        higher = [c for c in space.coarse if c > max(levels)]
        if higher:
            return step([(higher[0], 0)], f"pays at every measured level up to "
                        f"c={max(levels)}: climb to the next coarse level c={higher[0]}")
        return step([], f"pays at c={max(levels)}, the top of the range", ABOVE_RANGE)
    if last_pay is None:
        lower = [c for c in (*space.coarse, space.lattice[0]) if c < min(levels)]
        if lower:  # a prior started above the range's bottom
            return step([(max(lower), 0)], f"stops paying already at c={first_loss}: descend "
                        f"to the next coarse level c={max(lower)}")
        return step([], f"stops paying already at c={first_loss}, the bottom of the range",
                    BELOW_RANGE)
    between = [c for c in space.lattice if last_pay < c < first_loss]
    if not between:
        return step([], f"pays at c={last_pay}, stops paying at c={first_loss}: neighbouring "
                    "levels of the lattice", BRACKETED)
    k = space.points_per_step
    ratio = first_loss / last_pay
    picks = sorted({nearest(between, last_pay * ratio ** (t / (k + 1))) for t in range(1, k + 1)})
    how = f"bisect at c={picks[0]}" if k == 1 else f"{k + 1}-section at {_fmt(picks)}"
    return step([(c, 0) for c in picks], f"pays at c={last_pay}, stops paying at "
                f"c={first_loss}: {how}")


def replay(space: Space, measured: Mapping[Point, Measured]) -> list[Step]:
    """Every step of the search from the measured points: each step sees only the points its
    predecessors chose. The last step is a stop, or the one whose points are not all measured
    yet (what to run next)."""
    steps: list[Step] = []
    chosen: set[Point] = set()
    while True:
        step = next_step(space, level_speedups(measured, chosen), len(steps) + 1)
        steps.append(step)
        if step.stop is not None or not all(p in measured for p in step.points):
            return steps
        chosen.update(step.points)


def result(space: Space, steps: Sequence[Step]) -> dict:
    """The search's outcome for the trace: stop reason, bracket, cells spent, the lattice."""
    last = steps[-1]
    return {"stop": last.stop, "stop_meaning": STOP_REASONS.get(last.stop or "", None),
            "bracket": list(last.bracket), "cells": last.cells_before,
            "max_cells": space.max_cells, "lattice": list(space.lattice),
            "coarse": list(space.coarse), "max_repeats": space.max_repeats}


def prior_levels(lattice: Sequence[int], predicted: Sequence[float]) -> tuple[int, ...]:
    """The levels a prior's predicted speedups (one per lattice level) send the search to
    first: the two neighbours its crossover lies between (where it first stops paying, and
    the level below); the range's top alone when it pays everywhere, its bottom alone when it
    pays nowhere."""
    losing = [i for i, s in enumerate(predicted) if s < 0]
    if not losing:
        return (lattice[-1],)
    if losing[0] == 0:
        return (lattice[0],)
    return (lattice[losing[0] - 1], lattice[losing[0]])


def prior_check(lattice: Sequence[int], predicted: Sequence[float],
                levels: Mapping[int, tuple[float, float, float]]) -> dict:
    """How far the prior was from what the search measured (`levels`: load -> the measured
    speedup, lo, hi, as a Step records them): its predicted crossover, and at each measured
    level the predicted against the measured speedup (inside its interval or not), with the
    mean absolute error in points of speedup."""
    first = prior_levels(lattice, predicted)
    by_load = dict(zip(lattice, predicted, strict=True))
    seen = [(c, by_load[c], v, lo, hi) for c, (v, lo, hi) in sorted(levels.items())
            if c in by_load]
    rows = [{"load": c, "predicted": round(p, 4), "measured": round(v, 4),
             "interval": [round(lo, 4), round(hi, 4)], "inside": bool(lo <= p <= hi)}
            for c, p, v, lo, hi in seen]
    errors = [abs(p - v) for _, p, v, _, _ in seen]
    bracket = (list(first) if len(first) == 2 else
               [first[0], None] if first[0] == lattice[-1] else [None, first[0]])
    return {"predicted_bracket": bracket, "first": list(first), "levels": rows,
            "mean_abs_error": round(sum(errors) / len(errors), 4) if errors else None}
