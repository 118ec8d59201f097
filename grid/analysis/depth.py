"""A speculative depth by load (pure): one cell's throughput, one load's best depth
(`LevelState`), the schedule the levels make (docs/search.md "The depth search")."""

from __future__ import annotations

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
        return {"load": self.load, "candidates": list(self.candidates), "best": self.best,
                "runner": self.runner, "sign": self.sign, "stage": self.stage,
                **(self.versus.as_json() if self.versus is not None else {})}


def schedule(levels: Sequence[LevelState]) -> Schedule:
    """Each level's best depth from its load up to the next level's, the first from batch 1,
    equal neighbours merged (as vLLM's tune_speculative_k builds its ranges)."""
    tiers: list[tuple[int, int]] = []
    for lv in sorted(levels, key=lambda s: s.load):
        if lv.best is not None and (not tiers or tiers[-1][1] != lv.best):
            tiers.append((lv.load if tiers else 1, lv.best))
    return tuple(tiers)


def schedule_text(tiers: Schedule) -> str:
    return "schedule " + (", ".join(f"{d} from {b}" for b, d in tiers) if tiers else "none")
