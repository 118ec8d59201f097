"""A speculative depth by load (pure): one cell's throughput with its bootstrap replicates, one
load's best depth among those compared there (`LevelState`) and the schedule the levels make.
The depth search (grid/questions/depth/, docs/search.md "The depth search") decides the levels;
the cost surface's prediction (grid/analysis/surface/predict.py) makes its schedule here too."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from grid.analysis.search import Level

Schedule = tuple[tuple[int, int], ...]
"""(first running batch, depth) per tier, ascending."""


@dataclass(frozen=True)
class Throughput:
    """One cell's output tok/s and its bootstrap replicates."""

    value: float
    reps: np.ndarray = field(repr=False)


def rounded(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


@dataclass(frozen=True)
class LevelState:
    """One level (load) as known from the points chosen there."""

    load: int
    candidates: tuple[int, ...]
    best: int | None
    """Best depth by point estimate among the measured candidates (the smaller on a tie)."""
    runner: int | None = None
    """The second best, once the best's neighbours are measured."""
    versus: Level | None = None
    """best over runner."""
    sign: str | None = None
    needs: tuple[tuple[int, int, int], ...] = ()
    """(load, depth, repeat) still to measure."""
    stage: str = "coarse"
    """coarse, refine, repeat or decided."""

    @property
    def decided(self) -> bool:
        return not self.needs and self.best is not None

    def as_json(self) -> dict:
        out = {"load": self.load, "candidates": list(self.candidates), "best": self.best,
               "runner": self.runner, "sign": self.sign, "stage": self.stage}
        if self.versus is not None:
            out["speedup"] = rounded(self.versus.speedup)
            out["interval"] = [rounded(self.versus.lo), rounded(self.versus.hi)]
            out["repeats"] = self.versus.repeats
        return out


def schedule(levels: Sequence[LevelState]) -> Schedule:
    """Each level's best depth from its load up to the next level's, the first from batch 1,
    equal neighbours merged (levels without a best yet are skipped), as vLLM's
    tune_speculative_k builds its ranges."""
    tiers: list[tuple[int, int]] = []
    for lv in sorted(levels, key=lambda s: s.load):
        if lv.best is None:
            continue
        if not tiers:
            tiers.append((1, lv.best))
        elif tiers[-1][1] != lv.best:
            tiers.append((lv.load, lv.best))
    return tuple(tiers)


def schedule_text(tiers: Schedule) -> str:
    return "schedule " + (", ".join(f"{d} from {b}" for b, d in tiers) if tiers else "none")
