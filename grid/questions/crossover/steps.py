"""The crossover search's steps (docs/search.md "How it chooses"), pure: the next step is a
function of the measured points, so a crashed run replays the same steps."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from grid.analysis.repeats import pooled
from grid.analysis.search import Level, Space, level, nearest, sign
from grid.questions import steps as shared
from grid.questions.measure import Compared

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


def describe(point: Sequence[int]) -> str:
    """`c=16`, `c=16 repeat 1`."""
    load, repeat = point
    return f"c={load}" + (f" repeat {repeat}" if repeat else "")


def level_speedups(measured: Mapping[Point, Compared], points: Iterable[Point]
                   ) -> dict[int, Level]:
    """Per load, the speedup over the given points' repeats, the noise pooled over all loads."""
    by_load: dict[int, list[Compared]] = {}
    for point in sorted(set(points)):
        if point in measured:
            by_load.setdefault(point[0], []).append(measured[point])
    noise = pooled([[b.value for b, _ in ms] for ms in by_load.values()]
                   + [[v.value for _, v in ms] for ms in by_load.values()])
    return {load: level(load, [(b.value, b.reps) for b, _ in ms],
                        [(v.value, v.reps) for _, v in ms], noise)
            for load, ms in by_load.items()}


@dataclass(frozen=True)
class CrossoverStep:
    """One decision of the search: what to measure next (or why it stops)."""

    number: int
    points: tuple[Point, ...]
    why: str
    stop: str | None
    """None, or one of STOP_REASONS."""
    bracket: tuple[int | None, int | None]
    """(highest level where it pays, lowest where it stops paying); None: not found."""
    cells_before: int
    signs: dict[int, str] = field(default_factory=dict)
    """Each measured level's sign before the step: + - ? +p -p."""
    speedups: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    """Each measured level's speedup, lo, hi before the step."""
    phase: str = "crossover"

    def as_json(self) -> dict:
        return {**asdict(self), "points": [list(p) for p in self.points],
                "bracket": list(self.bracket), "signs": {str(k): v for k, v in self.signs.items()},
                "speedups": {str(k): [round(x, 4) for x in v] for k, v in self.speedups.items()}}


def _fmt(loads: Iterable[int]) -> str:
    return ", ".join(f"c={c}" for c in loads)


def next_step(space: Space, levels: Mapping[int, Level], number: int = 1) -> CrossoverStep:
    """The search's next step from the levels measured so far."""
    used = sum(lv.repeats for lv in levels.values()) * space.cells_per_point
    signs = {c: sign(levels[c], space.max_repeats, space.min_effect) for c in sorted(levels)}
    seen = {c: (levels[c].speedup, levels[c].lo, levels[c].hi) for c in sorted(levels)}
    first_loss = next((c for c, s in signs.items() if s.startswith("-")), None)
    last_pay = max((c for c, s in signs.items() if s.startswith("+")
                    and (first_loss is None or c < first_loss)), default=None)

    def step(points: list[Point], why: str, stop: str | None = None) -> CrossoverStep:
        todo: tuple[Point, ...] = ()
        if stop is None:  # the budget: as many of the points as fit
            todo, why, stop = shared.fit(
                points, (space.max_cells - used) // space.cells_per_point, why,
                f"{STOP_REASONS[BUDGET]} ({used} of {space.max_cells} cells)")
        return CrossoverStep(number, todo, why, stop, (last_pay, first_loss), used, signs, seen)

    if space.first:
        todo = [c for c in space.first if c not in levels]
        if todo:
            return step([(c, 0) for c in todo], f"the levels the prior ({space.prior}) "
                        f"points to: {_fmt(todo)}")
    else:
        middle = math.sqrt(space.lattice[0] * space.lattice[-1])
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


def replay(space: Space, measured: Mapping[Point, Compared]) -> list[CrossoverStep]:
    """Every step of the search from the measured points."""
    return shared.replay(lambda chosen, n: next_step(space, level_speedups(measured, chosen), n),
                         measured)


def result(space: Space, steps: Sequence[CrossoverStep]) -> dict:
    """The search's outcome for the trace."""
    last = steps[-1]
    return {"stop": last.stop, "stop_meaning": STOP_REASONS.get(last.stop or "", None),
            "bracket": list(last.bracket), "cells": last.cells_before,
            "max_cells": space.max_cells, "lattice": list(space.lattice),
            "coarse": list(space.coarse), "max_repeats": space.max_repeats}


def prior_levels(lattice: Sequence[int], predicted: Sequence[float]) -> tuple[int, ...]:
    """The levels a prior's predicted speedups (one per lattice level) send the search to first:
    the two around its crossover, the range's top or bottom alone when it pays at all or none."""
    losing = [i for i, s in enumerate(predicted) if s < 0]
    if not losing:
        return (lattice[-1],)
    if losing[0] == 0:
        return (lattice[0],)
    return (lattice[losing[0] - 1], lattice[losing[0]])


def prior_check(lattice: Sequence[int], predicted: Sequence[float],
                levels: Mapping[int, tuple[float, float, float]]) -> dict:
    """The prior against the measured `levels` (load -> speedup, lo, hi): its bracket, each
    level's predicted and measured speedup, the mean absolute error."""
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
