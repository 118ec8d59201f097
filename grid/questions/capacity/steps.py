"""The capacity search's steps (pure): the highest load of the lattice at which the variant
meets the SLOs, found by bracketing then bisecting over the lattice's indices (log load on a
geometric lattice), as the crossover search does with the sign of a speedup. A load **meets**
the SLOs when its SLO attainment is at least `target` (grid/analysis/capacity.py ATTAINMENT:
90 % of requests). The boundary is taken as monotone (a load above the first miss is never
measured), which is what the dense grid's capacity (the last load of the leading run that
meets them) reads too.

1. The lattice's two ends. The lowest misses: no load serves (stop); the highest meets them:
   the capacity is at least the highest (stop, not bracketed).
2. Then the midpoint (in lattice index) of the highest meeting and the lowest missing load,
   until they are neighbours: the capacity is the meeting one, its interval
   [capacity, next load). A **cliff**: the next load's attainment is below `cliff` (default
   0.5: most requests miss), one lattice step after a load that held the SLOs.

Nothing but the measured attainments carries the state: `replay` rebuilds every step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CLIFF = 0.5
"""Attainment below which the first missing load counts as a cliff (most requests miss)."""


@dataclass(frozen=True)
class CapacityStep:
    """One step: the loads it measures (or why the search stopped)."""

    number: int
    why: str
    """Why these loads."""
    points: tuple[int, ...]
    """Loads (concurrency) to measure at this step; () when stopped."""
    cells_before: int
    """Cells measured before this step."""
    stop: str | None = None
    """`bracketed`, `none served`, `all served`, `budget`; None while searching."""
    low: int | None = None
    """The highest load measured meeting the SLOs (below the lowest miss)."""
    high: int | None = None
    """The lowest load measured missing them."""

    def as_json(self) -> dict:
        return {"number": self.number, "why": self.why, "points": [[p] for p in self.points],
                "cells_before": self.cells_before, "stop": self.stop, "low": self.low,
                "high": self.high}


def _bounds(lattice: Sequence[int], meets: Mapping[int, bool]) -> tuple[int | None, int | None]:
    """(index of the highest meeting load below the lowest miss, index of the lowest miss)."""
    misses = [i for i, load in enumerate(lattice) if load in meets and not meets[load]]
    high = min(misses) if misses else None
    held = [i for i, load in enumerate(lattice) if load in meets and meets[load]
            and (high is None or i < high)]
    return (max(held) if held else None), high


def next_step(lattice: Sequence[int], attainment: Mapping[int, float], max_cells: int,
              target: float, number: int = 1) -> CapacityStep:
    """The step that follows the measured attainments (by load)."""
    n = len(attainment)
    meets = {load: a >= target for load, a in attainment.items()}
    ends = (lattice[0], lattice[-1])
    if not all(e in meets for e in ends):
        return CapacityStep(number, "bracket: the lattice's ends", ends, n)
    low, high = _bounds(lattice, meets)
    lo = None if low is None else lattice[low]
    hi = None if high is None else lattice[high]
    if high == 0:
        return CapacityStep(number, f"c={hi} misses the SLOs already", (), n, "none served",
                            None, hi)
    if high is None:
        return CapacityStep(number, f"c={lo} (the highest) meets the SLOs", (), n,
                            "all served", lo, None)
    assert low is not None
    if high - low <= 1:
        return CapacityStep(number, f"c={lo} meets the SLOs, c={hi} misses them", (), n,
                            "bracketed", lo, hi)
    if n >= max_cells:
        return CapacityStep(number, f"budget spent ({n} cells)", (), n, "budget", lo, hi)
    mid = lattice[(low + high) // 2]
    return CapacityStep(number, f"bisect between c={lo} (meets) and c={hi} (misses)", (mid,),
                        n, None, lo, hi)


def replay(lattice: Sequence[int], attainment: Mapping[int, float], max_cells: int,
           target: float) -> list[CapacityStep]:
    """Every step the search took given the attainments measured so far; the last one names
    the loads to measure next, or why it stopped."""
    known: dict[int, float] = {}
    steps: list[CapacityStep] = []
    while True:
        step = next_step(lattice, known, max_cells, target, len(steps) + 1)
        steps.append(step)
        if step.stop is not None or any(p not in attainment for p in step.points):
            return steps
        known.update({p: attainment[p] for p in step.points})


def result(steps: Sequence[CapacityStep], attainment: Mapping[int, float],
           lattice: Sequence[int], cliff: float = CLIFF) -> dict:
    """The outcome: the capacity, its interval [capacity, next lattice load) and the cliff."""
    last = steps[-1]
    measured = sorted(p for s in steps for p in s.points if p in attainment)
    out = {"stop": last.stop, "cells": len(measured), "capacity": last.low,
           "interval": [last.low, last.high], "bracketed": last.stop == "bracketed",
           "lattice": list(lattice), "dense_cells": len(lattice),
           "attainment": {str(p): round(attainment[p], 4) for p in measured}}
    out["cliff"] = bool(last.stop == "bracketed" and last.high is not None
                        and attainment[last.high] < cliff)
    return out
