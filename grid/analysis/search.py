"""What every question searches over (docs/questions.md), pure: the lattice of loads and the
budget (`Space`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Space:
    """What a search may measure and spend."""

    lattice: tuple[int, ...]
    """Every load the search may choose, ascending."""
    coarse: tuple[int, ...]
    """The coarse levels, a subset of the lattice (its ends included)."""
    max_cells: int


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


def make_space(low: int, high: int, factor: float, coarse: int, max_cells: int) -> Space:
    grid = lattice(low, high, factor)
    return Space(grid, coarse_levels(grid, coarse), max_cells)
