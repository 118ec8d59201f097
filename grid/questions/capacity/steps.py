"""The capacity search's steps (docs/questions.md "The capacity question"), pure: the lattice's two
ends, then the midpoint in lattice index (log load on a geometric lattice) of the highest load
that holds the SLOs and the lowest that does not, until they are neighbours: at most
2 + ceil(log2(loads - 1)) cells, 6 of a 16-load lattice. The answer reads the measured loads by
the dense grid's rule (grid/analysis/capacity.py `boundary`), with a cliff where the capacity
meets and the next lattice load misses with its whole interval below `CLIFF`. Nothing but the
measured attainments carries the state: `replay` rebuilds every step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from grid.analysis.capacity import MEETS, MISSES, UNDECIDED, Attainment, boundary
from grid.questions import steps as shared

CLIFF = 0.5
"""Attainment whose interval's top below it makes the first missing load a cliff (most requests
miss there)."""


@dataclass(frozen=True)
class CapacityStep:
    number: int
    why: str
    points: tuple[int, ...]
    """Loads (concurrency) to measure at this step; () when stopped."""
    cells_before: int
    stop: str | None = None
    """`bracketed`, `none served`, `all served`, `budget`; None while searching."""
    low: int | None = None
    """The highest load measured that holds the SLOs below the lowest that does not."""
    high: int | None = None
    """The lowest load measured that does not hold them."""

    def as_json(self) -> dict:
        return {**asdict(self), "points": [[p] for p in self.points]}


def next_step(lattice: Sequence[int], measured: Mapping[int, Attainment], max_cells: int,
              target: float, number: int = 1) -> CapacityStep:
    """The step that follows the measured attainments (by load)."""
    n = len(measured)
    ends = (lattice[0], lattice[-1])
    if not all(e in measured for e in ends):
        return CapacityStep(number, "bracket: the lattice's ends", ends, n)
    holds = {i: measured[x].holds(target) for i, x in enumerate(lattice) if x in measured}
    high = min((i for i, h in holds.items() if not h), default=None)
    low = max((i for i, h in holds.items() if h and (high is None or i < high)), default=None)
    lo, hi = (None if i is None else lattice[i] for i in (low, high))
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
    """The search's steps from the attainments measured (grid/questions/steps.py `replay`)."""
    return shared.replay(lambda chosen, n: next_step(
        lattice, {p: measured[p] for p in chosen}, max_cells, target, n), measured)


def result(steps: Sequence[CapacityStep], measured: Mapping[int, Attainment],
           lattice: Sequence[int], target: float, cliff: float = CLIFF) -> dict:
    """The outcome: the capacity, its interval on the lattice [low end, load below the first
    miss] with the undecided loads in it and how many of its loads were not measured, the
    cliff, and each measured load's attainment."""
    chosen = {p: measured[p] for s in steps for p in s.points if p in measured}
    loads = sorted(chosen)
    cap, low, miss, _ = boundary([chosen[x] for x in loads], target).at(loads, None)
    top = (lattice[-1] if miss is None else
           None if miss == lattice[0] else lattice[lattice.index(miss) - 1])
    undecided = [x for x in loads if chosen[x].verdict(target) == UNDECIDED
                 and (low is None or x > low) and (miss is None or x < miss)]
    after = (None if cap is None or cap == lattice[-1]
             else chosen.get(lattice[lattice.index(cap) + 1]))
    steep = (cap is not None and chosen[cap].verdict(target) == MEETS and after is not None
             and after.verdict(target) == MISSES and after.interval[1] < cliff)
    inside = [x for x in lattice if top is not None and x <= top and (low is None or x >= low)]
    return {"stop": steps[-1].stop, "cells": len(chosen), "capacity": cap,
            # loads held by their point estimates, none shown to meet: not a capacity to claim
            "undetermined": low is None and cap is not None,
            # the capacity held by its point estimate alone (undecided there): said so
            "point_estimate": cap is not None and chosen[cap].verdict(target) != MEETS,
            "interval": [low, top], "first_miss": miss, "undecided": undecided,
            "unmeasured": sum(x not in chosen for x in inside),
            "bracketed": steps[-1].stop == "bracketed", "cliff": steep,
            "lattice": list(lattice), "dense_cells": len(lattice),
            "attainment": {str(x): chosen[x].as_json(target) for x in loads}}
