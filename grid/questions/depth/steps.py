"""The depth search's steps (docs/search.md "The depth search"), pure: a level decided in
stages (coarse, refine, repeat), levels opened between neighbours whose bests differ."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grid.analysis.depth import LevelState, Schedule, Throughput, schedule, schedule_text
from grid.analysis.repeats import pooled
from grid.analysis.search import Level, is_tie, level, nearest, sign
from grid.questions import steps as shared

DepthPoint = tuple[int, int, int]
"""(load, depth, repeat): one cell (depth 0 = the baseline server)."""
By = Mapping[tuple[int, int], list[Throughput]]
"""The measured points by (load, depth), repeats in order."""

RESOLVED = "resolved"
BUDGET = "budget"
DEPTH_STOPS = {
    RESOLVED: "every level's best depth is decided and every switch between depths is "
              "bracketed between neighbouring levels (or ties at both ends)",
    BUDGET: "grid.search.max_cells is spent before every switch was bracketed",
}


@dataclass(frozen=True)
class DepthSpace:
    lattice: tuple[int, ...]
    coarse: tuple[int, ...]
    """Levels decided first over every depth (the lattice's ends among them)."""
    depths: tuple[int, ...]
    """Ascending; 0 (the baseline) first."""
    max_cells: int
    max_repeats: int
    min_effect: float = 0.0
    prior: tuple[tuple[int, int], ...] = ()
    """(load, predicted best depth): a twin's answer (grid.search.prior); empty: none."""

    def predicted(self, load: int) -> int | None:
        return dict(self.prior).get(load)


def first_depths(candidates: Sequence[int], predicted: int | None) -> tuple[int, ...]:
    """A level's first depths: its candidates' ends and middle, or the candidate nearest a
    predicted best (the smaller on a tie) and its neighbours."""
    if predicted is None:
        return tuple(dict.fromkeys((candidates[0], candidates[len(candidates) // 2],
                                    candidates[-1])))
    i = min(range(len(candidates)), key=lambda j: (abs(candidates[j] - predicted), j))
    return tuple(candidates[j] for j in (i - 1, i, i + 1) if 0 <= j < len(candidates))


def prior_depths(depths: Sequence[int], lattice: Sequence[int],
                 speedups: Mapping[int, Sequence[float]]) -> tuple[tuple[int, int], ...]:
    """(load, the depth predicted fastest, the smaller on a tie) at each level, from each
    positive depth's predicted speedup over the baseline (depth 0)."""
    out = []
    for i, load in enumerate(lattice):
        value = {0: 0.0, **{d: float(speedups[d][i]) for d in depths if d > 0}}
        out.append((load, min(value, key=lambda d: (-value[d], d))))
    return tuple(out)


def means(measured: Mapping[DepthPoint, Throughput], chosen: Sequence[DepthPoint] | set
          ) -> dict[tuple[int, int], list[Throughput]]:
    """The chosen, measured points by (load, depth), repeats in order."""
    out: dict[tuple[int, int], list[Throughput]] = {}
    for point in sorted(set(chosen)):
        if point in measured:
            out.setdefault(point[:2], []).append(measured[point])
    return out


def compare(by: By, load: int, a: int, b: int) -> Level:
    """Depth a over depth b at `load`, the noise pooled over every measured (load, depth)."""
    noise = pooled([[t.value for t in ts] for ts in by.values()])
    return level(load, [(t.value, t.reps) for t in by[(load, b)]],
                 [(t.value, t.reps) for t in by[(load, a)]], noise, f"depth:{a}:{b}")


def assess(space: DepthSpace, by: By, load: int, candidates: tuple[int, ...]) -> LevelState:
    """Where one level stands and what it needs next."""
    measured = [d for d in candidates if (load, d) in by]

    def value(d: int) -> float:
        return float(np.mean([t.value for t in by[(load, d)]]))

    best = max(measured, key=lambda d: (value(d), -d)) if measured else None
    coarse = first_depths(candidates, space.predicted(load))
    missing = [d for d in coarse if d not in measured]
    if missing:
        return LevelState(load, candidates, best, needs=tuple((load, d, 0) for d in missing))
    assert best is not None
    i = candidates.index(best)
    near = [candidates[j] for j in (i - 1, i + 1) if 0 <= j < len(candidates)]
    missing = [d for d in near if d not in measured]
    if missing:
        return LevelState(load, candidates, best, needs=tuple((load, d, 0) for d in missing),
                          stage="refine")
    others = [d for d in measured if d != best]
    if not others:  # a single candidate: nothing to compare
        return LevelState(load, candidates, best, stage="decided")
    runner = max(others, key=lambda d: (value(d), -d))
    versus = compare(by, load, best, runner)
    s = sign(versus, space.max_repeats, space.min_effect)
    if s == "?":
        counts = {d: len(by[(load, d)]) for d in (best, runner)}
        low = min(counts.values())
        needs = tuple((load, d, n) for d, n in sorted(counts.items()) if n == low)
        return LevelState(load, candidates, best, runner, versus, s, needs, "repeat")
    return LevelState(load, candidates, best, runner, versus, s, (), "decided")


@dataclass(frozen=True)
class DepthStep:
    number: int
    points: tuple[DepthPoint, ...]
    why: str
    stop: str | None
    cells_before: int
    levels: tuple[LevelState, ...] = ()
    """Every level known before the step, ascending by load."""
    phase: str = "depth"

    def as_json(self) -> dict:
        return {"number": self.number, "phase": self.phase,
                "points": [list(p) for p in self.points], "why": self.why, "stop": self.stop,
                "cells_before": self.cells_before,
                "best": {str(lv.load): lv.best for lv in self.levels},
                "signs": {str(lv.load): lv.sign for lv in self.levels if lv.sign}}


def levels_of(space: DepthSpace, by: By) -> tuple[list[LevelState], dict[int, str]]:
    """Every level the search has opened, ascending, and why each bisection level was."""
    cand = {c: space.depths for c in space.coarse}
    reasons: dict[int, str] = {}
    while True:
        states = {c: assess(space, by, c, cand[c]) for c in sorted(cand)}
        if any(not s.decided for s in states.values()):
            return [states[c] for c in sorted(states)], reasons
        opened: dict[int, tuple[int, ...]] = {}
        loads = sorted(states)
        for lo, hi in zip(loads, loads[1:], strict=False):
            a, b = states[lo].best, states[hi].best
            assert a is not None and b is not None
            between = [c for c in space.lattice if lo < c < hi]
            if a == b or not between or _tied(space, by, lo, hi, a, b):
                continue
            mid = nearest(between, math.sqrt(lo * hi))
            opened[mid] = tuple(d for d in space.depths if min(a, b) <= d <= max(a, b))
            shown = "{" + ", ".join(str(d) for d in opened[mid]) + "}"
            reasons[mid] = f"best depth {a} at c={lo}, {b} at c={hi}: c={mid} over depths {shown}"
        if not opened:
            return [states[c] for c in loads], reasons
        cand.update(opened)


def _tied(space: DepthSpace, by: By, lo: int, hi: int, a: int, b: int) -> bool:
    """Both bests measured at both ends, and within ±min_effect of each other at both."""
    if not all((c, d) in by for c in (lo, hi) for d in (a, b)):
        return False
    return all(is_tie(compare(by, c, a, b), space.min_effect) for c in (lo, hi))


def next_depth_step(space: DepthSpace, by: By, chosen: set[DepthPoint], number: int = 1
                    ) -> DepthStep:
    """The search's next step from the chosen points' measurements."""
    used = len(chosen)
    levels, reasons = levels_of(space, by)
    todo = sorted({p for lv in levels for p in lv.needs})
    if not todo:
        return DepthStep(number, (), "every level decided, every switch bracketed: "
                         + schedule_text(schedule(levels)), RESOLVED, used, tuple(levels))
    stages = sorted({lv.stage for lv in levels if lv.needs})
    why = f"{', '.join(stages)} at " + ", ".join(f"c={lv.load}" for lv in levels if lv.needs)
    if space.prior and "coarse" in stages:
        why += " (the prior's best depth and its neighbours first)"
    opened = [reasons[lv.load] for lv in levels if lv.needs and lv.load in reasons]
    if opened:
        why += f" ({'; '.join(opened)})"
    points, why, stop = shared.fit(todo, space.max_cells - used, why, f"{DEPTH_STOPS[BUDGET]} "
                                   f"({used} of {space.max_cells} cells)", unit="cell(s)")
    return DepthStep(number, points, why, stop, used, tuple(levels))


def replay_depth(space: DepthSpace, measured: Mapping[DepthPoint, Throughput]
                 ) -> list[DepthStep]:
    """Every step from the measured points."""
    return shared.replay(lambda chosen, n: next_depth_step(space, means(measured, chosen),
                                                           chosen, n), measured)


def depth_at(tiers: Schedule, load: int) -> int | None:
    """The schedule's depth for a running batch of `load`."""
    return next((depth for start, depth in reversed(tiers) if start <= load), None)


def best_single_depth(tiers: Schedule, lattice: Sequence[int]) -> int | None:
    """The positive depth the schedule gives at the most levels (None: it never drafts)."""
    counts = Counter(d for c in lattice if (d := depth_at(tiers, c)))
    return min(counts, key=lambda d: (-counts[d], d)) if counts else None


def depth_result(space: DepthSpace, steps: Sequence[DepthStep]) -> dict:
    """The outcome for the trace (with a prior: its best depths against the decided ones)."""
    last = steps[-1]
    tiers = schedule(last.levels)
    out: dict[str, Any] = {
        "stop": last.stop, "stop_meaning": DEPTH_STOPS.get(last.stop or ""),
        "schedule": [list(t) for t in tiers],
        "best_single_depth": best_single_depth(tiers, space.lattice),
        "levels": [lv.as_json() for lv in last.levels], "cells": last.cells_before,
        "max_cells": space.max_cells, "lattice": list(space.lattice),
        "coarse": list(space.coarse), "depths": list(space.depths),
        "max_repeats": space.max_repeats, "min_effect": space.min_effect}
    if space.prior:
        rows = [{"load": lv.load, "predicted": space.predicted(lv.load), "measured": lv.best}
                for lv in last.levels if lv.decided and space.predicted(lv.load) is not None]
        out["prior"] = {"predicted": [list(p) for p in space.prior], "levels": rows,
                        "agree": sum(r["predicted"] == r["measured"] for r in rows),
                        "of": len(rows)}
    return out
