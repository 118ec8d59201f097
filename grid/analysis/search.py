"""What every adaptive search measures on (docs/search.md, pure): the lattice of loads it may
choose and its budget (`Space`), and the speedup of one set of repeats over another at one load
with its 95 % bootstrap interval (`Level`) and its sign, as the report's decision reads them.
The questions build their steps on these (grid/questions/); a depth level holds a `Level`
(grid/analysis/depth.py).

Loads live on a lattice: the range's lower end times the resolution factor to the k-th power,
rounded to whole streams, so every cell a search may choose is one a dense grid of the same
factor would hold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grid.analysis.bootstrap import interval
from grid.analysis.repeats import RepeatNoise, combine


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
    """Levels measured first instead of the coarse ones (a prior's, grid/questions/crossover/
    steps.py `prior_levels`); empty: the coarse levels."""
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
    """The level nearest `target` in log load, the lower one on a tie (to 1e-9: the geometric
    middle of two levels is as near to each, and cheaper at the lower)."""
    return min(levels, key=lambda v: (round(abs(math.log(v / target)), 9), v))


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
    grid/analysis/decision.py); `repeats` is the smaller repeat count of the two."""
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


def is_tie(level: Level, min_effect: float) -> bool:
    """The interval straddles 0 within ±min_effect: too small a difference to matter."""
    return level.lo <= 0 <= level.hi and -min_effect <= level.lo and level.hi <= min_effect


def sign(level: Level, max_repeats: int, min_effect: float = 0.0) -> str:
    """`+` (interval above 0), `-` (below), `?` (straddles 0 beyond ±min_effect with repeats
    left), else the point estimate's sign: `+p`, `-p`."""
    if level.lo > 0:
        return "+"
    if level.hi < 0:
        return "-"
    if level.repeats < max_repeats and not is_tie(level, min_effect):
        return "?"
    return "+p" if level.speedup > 0 else "-p"
