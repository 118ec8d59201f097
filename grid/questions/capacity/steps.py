"""The capacity search's steps (pure): the report's capacity (grid/analysis/capacity.py) found
with a few loads of the lattice instead of all of them, read by the same rule. Each measured
load's attainment has its exact 95 % interval and a verdict: it **meets** the SLOs (the
interval at or above `target`, ATTAINMENT: 90 % of requests), **misses** them (below) or is
**undecided** (the interval holds the target: few requests, or an attainment near it). A load
**holds** when it is not a miss and its point estimate reaches the target: the capacity is the
last load that holds, going up from the highest load that meets (`boundary`).

1. The lattice's two ends. The lowest does not hold: no load serves (stop); the highest holds:
   the capacity is at least the highest (stop, not bracketed).
2. Then the midpoint (in lattice index: log load on a geometric lattice) of the highest load
   that holds and the lowest that does not, until they are neighbours (bracketed): at most
   2 + ceil(log2(loads - 1)) cells, 6 of a 16-load lattice.
3. The answer, from the measured loads by the dense grid's rule: the capacity, its interval
   from the highest load that meets (below the first miss) to the lattice load below the first
   miss, and the undecided loads in it, reported as such, not re-measured (an attainment near
   the target stays undecided however many requests). A **cliff**: the capacity meets, the next
   lattice load misses with its attainment's whole interval below `cliff` (0.5: most requests
   miss there).

Nothing but the measured attainments carries the state: `replay` rebuilds every step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grid.analysis.capacity import MEETS, MISSES, UNDECIDED, Attainment, boundary

CLIFF = 0.5
"""Attainment whose interval's top below it makes the first missing load a cliff (most requests
miss there)."""


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
    """The highest load measured that holds the SLOs below the lowest that does not."""
    high: int | None = None
    """The lowest load measured that does not hold them."""

    def as_json(self) -> dict:
        return {"number": self.number, "why": self.why, "points": [[p] for p in self.points],
                "cells_before": self.cells_before, "stop": self.stop, "low": self.low,
                "high": self.high}


@dataclass(frozen=True)
class Bounds:
    """The boundary read on the measured loads (lattice loads; None: no such load)."""

    capacity: int | None
    low: int | None
    miss: int | None


def bounds(measured: Mapping[int, Attainment], target: float) -> Bounds:
    """`boundary` (the dense grid's rule) on the measured loads."""
    loads = sorted(measured)
    rule = boundary([measured[x] for x in loads], target)
    at = [None, *loads]  # index + 1: None -> None
    return Bounds(*(at[0 if i is None else i + 1]
                    for i in (rule.capacity, rule.low, rule.first_miss)))


def next_step(lattice: Sequence[int], measured: Mapping[int, Attainment], max_cells: int,
              target: float, number: int = 1) -> CapacityStep:
    """The step that follows the measured attainments (by load)."""
    n = len(measured)
    ends = (lattice[0], lattice[-1])
    if not all(e in measured for e in ends):
        return CapacityStep(number, "bracket: the lattice's ends", ends, n)
    fails = [i for i, x in enumerate(lattice) if x in measured
             and not measured[x].holds(target)]
    high = min(fails) if fails else None
    held = [i for i, x in enumerate(lattice) if x in measured and measured[x].holds(target)
            and (high is None or i < high)]
    low = max(held) if held else None
    lo = None if low is None else lattice[low]
    hi = None if high is None else lattice[high]
    if high == 0:
        return CapacityStep(number, f"c={hi} does not hold the SLOs already", (), n,
                            "none served", None, hi)
    if high is None:
        return CapacityStep(number, f"c={lo} (the highest) holds the SLOs", (), n,
                            "all served", lo, None)
    assert low is not None
    if high - low <= 1:
        return CapacityStep(number, f"c={lo} holds the SLOs, c={hi} does not", (), n,
                            "bracketed", lo, hi)
    if n >= max_cells:
        return CapacityStep(number, f"budget spent ({n} cells)", (), n, "budget", lo, hi)
    mid = lattice[(low + high) // 2]
    return CapacityStep(number, f"bisect between c={lo} (holds) and c={hi} (does not)",
                        (mid,), n, None, lo, hi)


def replay(lattice: Sequence[int], measured: Mapping[int, Attainment], max_cells: int,
           target: float) -> list[CapacityStep]:
    """Every step the search took given the attainments measured so far; the last one names
    the loads to measure next, or why it stopped."""
    known: dict[int, Attainment] = {}
    steps: list[CapacityStep] = []
    while True:
        step = next_step(lattice, known, max_cells, target, len(steps) + 1)
        steps.append(step)
        if step.stop is not None or any(p not in measured for p in step.points):
            return steps
        known.update({p: measured[p] for p in step.points})


def result(steps: Sequence[CapacityStep], measured: Mapping[int, Attainment],
           lattice: Sequence[int], target: float, cliff: float = CLIFF) -> dict:
    """The outcome: the capacity, its interval on the lattice [low end, load below the first
    miss] with the undecided loads in it and how many of its loads were not measured, the
    cliff, and each measured load's attainment."""
    chosen = {p: measured[p] for s in steps for p in s.points if p in measured}
    found = bounds(chosen, target)
    top = (lattice[-1] if found.miss is None else
           None if found.miss == lattice[0] else lattice[lattice.index(found.miss) - 1])
    undecided = [x for x in sorted(chosen) if chosen[x].verdict(target) == UNDECIDED
                 and (found.low is None or x > found.low)
                 and (found.miss is None or x < found.miss)]
    after = (None if found.capacity is None or found.capacity == lattice[-1]
             else chosen.get(lattice[lattice.index(found.capacity) + 1]))
    steep = (found.capacity is not None and chosen[found.capacity].verdict(target) == MEETS
             and after is not None and after.verdict(target) == MISSES
             and after.interval[1] < cliff)
    inside = [x for x in lattice if top is not None and x <= top
              and (found.low is None or x >= found.low)]
    return {"stop": steps[-1].stop, "cells": len(chosen), "capacity": found.capacity,
            "interval": [found.low, top], "first_miss": found.miss, "undecided": undecided,
            "unmeasured": sum(x not in chosen for x in inside),
            "bracketed": steps[-1].stop == "bracketed", "cliff": steep,
            "lattice": list(lattice), "dense_cells": len(lattice),
            "attainment": {str(x): chosen[x].as_json(target) for x in sorted(chosen)}}
