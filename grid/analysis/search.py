"""What every adaptive search measures on (docs/search.md "How it chooses"), pure: the lattice
of loads and the budget (`Space`), a speedup over repeats with its interval (`Level`), its sign."""

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
    """An interval within ±min_effect is a tie: its point estimate decides, without repeats."""
    points_per_step: int = 1
    """Levels one bisection step places (a k-section), repeats an undecided level gets at once."""
    cells_per_point: int = 2
    """Cells one point costs: the baseline and the compared variant."""
    first: tuple[int, ...] = ()
    """Levels measured first instead of the coarse ones (a prior's); empty: the coarse ones."""
    prior: str | None = None
    """Where `first` comes from, in words (`twin of RUN`)."""


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
    """The level nearest `target` in log load, the lower one on a tie (to 1e-9)."""
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

    def as_json(self) -> dict:
        return {"speedup": rounded(self.speedup), "interval": [rounded(self.lo), rounded(self.hi)],
                "repeats": self.repeats}


def rounded(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


def level(load: int, base: Sequence[tuple[float, np.ndarray]],
          variant: Sequence[tuple[float, np.ndarray]], noise: RepeatNoise, key: str = ""
          ) -> Level:
    """The speedup at one load from each side's repeats, (value, replicates) each, the
    replicates combined over repeats as the decision's are (`pooled_t`)."""
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
    """`+` / `-` (interval above / below 0), `?` (undecided, repeats left), else `+p` / `-p`."""
    if level.lo > 0:
        return "+"
    if level.hi < 0:
        return "-"
    if level.repeats < max_repeats and not is_tie(level, min_effect):
        return "?"
    return "+p" if level.speedup > 0 else "-p"
