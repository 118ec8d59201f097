"""The depth search (`grid.search.kind=depth`, docs/search.md): the best speculative depth at
each batch tier, with as few cells as the answer needs.

Pure, like grid/analysis/search.py: the next step is a function of the points its predecessors
chose and their measurements, so a run that crashed replays the same steps from its committed
cells. A point is (load, depth, repeat): ONE cell, the baseline server's at depth 0 (the honest
comparison for "which depth at this load" includes not speculating at all; a schedule's depth-0
tier runs the engine's zero-step path instead, which the confirmation measures), else the
speculative variant with `speculative_num_steps = depth`. Loads live on the crossover search's
lattice; depths are `grid.search.depths` (ascending, 0 first).

Throughput per (load, depth) is the mean over its repeats; depth a against depth b at one load
is T_a / T_b - 1 with its seeded bootstrap 95 % interval (grid/analysis/search.py
`level_speedups`, the report's numbers), signed as a crossover level (`sign`: + - ?, or +p -p
once repeats are spent or the interval lies within ±min_effect, a tie).

A level (one load) with candidate depths C (a contiguous run of the depths) is decided in
stages, each a step's points:

1. coarse: C's ends and its middle (`{0, 3, 7}` for 0 1 2 3 5 7); with a prior (a twin's
   predicted best depth at the level, `grid.search.prior`), the candidate nearest the
   prediction and its two neighbours instead;
2. refine: the untested neighbours (within C) of the best so far, until the best's neighbours
   are all measured (the throughput is taken as unimodal in depth within C);
3. decide: the best against the runner-up (the two best depths); an interval that straddles 0
   beyond ±min_effect gets one more repeat of both, up to max_repeats.

Loads: the coarse levels (`grid.search.coarse_levels` of the lattice, its ends included) are
levels with C = every depth. Once every level is decided, neighbouring levels share evidence:
between two neighbouring levels with the same best depth every load takes it (no cells); where
they differ, the level nearest their geometric middle becomes a new level with C = the depths
between the two bests (the best depth is taken as monotone between decided levels), until the
two are neighbours on the lattice, or both bests are measured at both ends and tie there
(within ±min_effect: where the switch falls between them is worth less than min_effect).

The schedule: each decided level's best depth from that load up to the next level's (the first
from batch 1), equal neighbours merged, as vLLM's tune_speculative_k builds its ranges. Stops:
`resolved` or `budget` (max_cells: a step that does not fit whole runs the points that fit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from grid.analysis.repeats import pooled
from grid.analysis.search import Level, level, sign

DepthPoint = tuple[int, int, int]
"""(load, depth, repeat): one cell (depth 0 = the baseline server)."""

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
    """(load, predicted best depth) at lattice levels: a twin's answer (grid.search.prior),
    where each level's first cells go; empty: the coarse depths."""

    def predicted(self, load: int) -> int | None:
        return dict(self.prior).get(load)


def first_depths(candidates: Sequence[int], predicted: int | None) -> tuple[int, ...]:
    """A level's first depths: its candidates' ends and middle, or, with a predicted best,
    the candidate nearest it (the smaller on a tie) and that candidate's neighbours."""
    if predicted is None:
        return tuple(dict.fromkeys((candidates[0], candidates[len(candidates) // 2],
                                    candidates[-1])))
    i = min(range(len(candidates)), key=lambda j: (abs(candidates[j] - predicted), j))
    return tuple(candidates[j] for j in (i - 1, i, i + 1) if 0 <= j < len(candidates))


def prior_depths(depths: Sequence[int], lattice: Sequence[int],
                 speedups: Mapping[int, Sequence[float]]) -> tuple[tuple[int, int], ...]:
    """(load, the depth predicted fastest) at each lattice level from a model's predicted
    speedup over the baseline (depth 0, speedup 0) of each positive depth at every level;
    the smaller depth on a tie."""
    out = []
    for i, load in enumerate(lattice):
        value = {0: 0.0, **{d: float(speedups[d][i]) for d in depths if d > 0}}
        out.append((load, min(value, key=lambda d: (-value[d], d))))
    return tuple(out)


@dataclass(frozen=True)
class Throughput:
    """One cell's output tok/s and its bootstrap replicates."""

    value: float
    reps: np.ndarray = field(repr=False)


def means(measured: Mapping[DepthPoint, Throughput], chosen: Sequence[DepthPoint] | set
          ) -> dict[tuple[int, int], list[Throughput]]:
    """The chosen, measured points by (load, depth), repeats in order."""
    out: dict[tuple[int, int], list[Throughput]] = {}
    for point in sorted(set(chosen)):
        if point in measured:
            out.setdefault(point[:2], []).append(measured[point])
    return out


def compare(by: Mapping[tuple[int, int], list[Throughput]], load: int, a: int, b: int
            ) -> Level:
    """Depth a over depth b at `load` over each one's repeats (grid/analysis/search.py
    `level`: the between-repeat noise pooled over every measured (load, depth)): `repeats` is
    the smaller repeat count of the two."""
    noise = pooled([[t.value for t in ts] for ts in by.values()])
    level_ = level(load, [(t.value, t.reps) for t in by[(load, b)]],
                   [(t.value, t.reps) for t in by[(load, a)]], noise, f"depth:{a}:{b}")
    return Level(load, level_.repeats, level_.speedup, level_.lo, level_.hi)


def nearest(levels: Sequence[int], target: float) -> int:
    """The level nearest `target` in log load, the lower one on a tie (to 1e-9: the
    geometric middle of two levels is as near to each)."""
    return min(levels, key=lambda v: (round(abs(math.log(v / target)), 9), v))


def is_tie(level: Level, min_effect: float) -> bool:
    """The interval lies within ±min_effect (and straddles 0): too small a difference to
    matter."""
    return level.lo <= 0 <= level.hi and -min_effect <= level.lo and level.hi <= min_effect


@dataclass(frozen=True)
class LevelState:
    """One level as known from the chosen points."""

    load: int
    candidates: tuple[int, ...]
    best: int | None
    """Best depth by point estimate among the measured candidates (the smaller on a tie)."""
    runner: int | None = None
    """The second best, once the best's neighbours are measured."""
    versus: Level | None = None
    """best over runner."""
    sign: str | None = None
    needs: tuple[DepthPoint, ...] = ()
    stage: str = "coarse"
    """coarse, refine, repeat or decided."""

    @property
    def decided(self) -> bool:
        return not self.needs and self.best is not None

    def as_json(self) -> dict:
        out = {"load": self.load, "candidates": list(self.candidates), "best": self.best,
               "runner": self.runner, "sign": self.sign, "stage": self.stage}
        if self.versus is not None:
            out["speedup"] = _round(self.versus.speedup)
            out["interval"] = [_round(self.versus.lo), _round(self.versus.hi)]
            out["repeats"] = self.versus.repeats
        return out


def _round(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


def assess(space: DepthSpace, by: Mapping[tuple[int, int], list[Throughput]], load: int,
           candidates: tuple[int, ...]) -> LevelState:
    """Where one level stands and what it needs next (module docstring, stages 1-3)."""
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


def describe(point: Sequence[int]) -> str:
    """`c=16 depth 3`, `c=16 baseline repeat 1`."""
    load, depth, repeat = point
    what = "baseline" if depth == 0 else f"depth {depth}"
    return f"c={load} {what}" + (f" repeat {repeat}" if repeat else "")


def levels_of(space: DepthSpace, by: Mapping[tuple[int, int], list[Throughput]]
              ) -> tuple[list[LevelState], dict[int, str]]:
    """Every level the search has opened, ascending, and why each bisection level was
    opened: the coarse levels, then, while all opened levels are decided, one level between
    each pair of neighbouring decided levels whose bests differ."""
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
            low, high = min(a, b), max(a, b)
            opened[mid] = tuple(d for d in space.depths if low <= d <= high)
            reasons[mid] = (f"best depth {a} at c={lo}, {b} at c={hi}: c={mid} over depths "
                            f"{_depths(opened[mid])}")
        if not opened:
            return [states[c] for c in loads], reasons
        cand.update(opened)


def _tied(space: DepthSpace, by: Mapping[tuple[int, int], list[Throughput]], lo: int,
          hi: int, a: int, b: int) -> bool:
    """Both bests measured at both ends, and within ±min_effect of each other at both."""
    if not all((c, d) in by for c in (lo, hi) for d in (a, b)):
        return False
    return all(is_tie(compare(by, c, a, b), space.min_effect) for c in (lo, hi))


def _depths(depths: Sequence[int]) -> str:
    return "{" + ", ".join(str(d) for d in depths) + "}"


def next_depth_step(space: DepthSpace, by: Mapping[tuple[int, int], list[Throughput]],
                    chosen: set[DepthPoint], number: int = 1) -> DepthStep:
    """The search's next step from the chosen points' measurements (module docstring)."""
    used = len(chosen)
    levels, reasons = levels_of(space, by)
    todo = sorted({p for lv in levels for p in lv.needs})
    if not todo:
        return DepthStep(number, (), "every level decided, every switch bracketed: "
                         + schedule_text(schedule(levels)), RESOLVED, used, tuple(levels))
    stages = sorted({lv.stage for lv in levels if lv.needs})
    why = (f"{', '.join(stages)} at " + ", ".join(
        f"c={lv.load}" for lv in levels if lv.needs))
    if space.prior and "coarse" in stages:
        why += " (the prior's best depth and its neighbours first)"
    opened = [reasons[lv.load] for lv in levels if lv.needs and lv.load in reasons]
    if opened:
        why += f" ({'; '.join(opened)})"
    fit = max(0, space.max_cells - used)
    if fit == 0:
        return DepthStep(number, (), f"{why}: not measured, {DEPTH_STOPS[BUDGET]} ({used} of "
                         f"{space.max_cells} cells)", BUDGET, used, tuple(levels))
    if fit < len(todo):
        why += f" (only {fit} of {len(todo)} cell(s) fit the budget)"
        todo = todo[:fit]
    return DepthStep(number, tuple(todo), why, None, used, tuple(levels))


def replay_depth(space: DepthSpace, measured: Mapping[DepthPoint, Throughput]
                 ) -> list[DepthStep]:
    """Every step from the measured points, each seeing only what its predecessors chose; the
    last is a stop or the step whose points are not all measured yet."""
    steps: list[DepthStep] = []
    chosen: set[DepthPoint] = set()
    while True:
        step = next_depth_step(space, means(measured, chosen), chosen, len(steps) + 1)
        steps.append(step)
        if step.stop is not None or not all(p in measured for p in step.points):
            return steps
        chosen.update(step.points)


Schedule = tuple[tuple[int, int], ...]


def schedule(levels: Sequence[LevelState]) -> Schedule:
    """Each level's best depth from its load up to the next level's, the first from batch 1,
    equal neighbours merged (levels without a best yet are skipped)."""
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


def depth_at(tiers: Schedule, load: int) -> int | None:
    """The schedule's depth for a running batch of `load`."""
    out = None
    for start, depth in tiers:
        if start <= load:
            out = depth
    return out


def best_single_depth(tiers: Schedule, lattice: Sequence[int]) -> int | None:
    """The static speculative depth an operator would run instead of the schedule: the
    positive depth the schedule gives at the most lattice levels (the smaller on a tie);
    None when it never drafts."""
    counts: dict[int, int] = {}
    for c in lattice:
        d = depth_at(tiers, c)
        if d:
            counts[d] = counts.get(d, 0) + 1
    return min(counts, key=lambda d: (-counts[d], d)) if counts else None


def prior_check_depth(space: DepthSpace, levels: Sequence[LevelState]) -> dict | None:
    """How the prior's best depths compared with the decided levels' (None without one)."""
    if not space.prior:
        return None
    rows = [{"load": lv.load, "predicted": space.predicted(lv.load), "measured": lv.best}
            for lv in levels if lv.decided and space.predicted(lv.load) is not None]
    return {"predicted": [list(p) for p in space.prior], "levels": rows,
            "agree": sum(r["predicted"] == r["measured"] for r in rows), "of": len(rows)}


def depth_result(space: DepthSpace, steps: Sequence[DepthStep]) -> dict:
    """The outcome for the trace: stop, the schedule, every level's evidence, cells."""
    last = steps[-1]
    tiers = schedule(last.levels)
    return {"stop": last.stop, "stop_meaning": DEPTH_STOPS.get(last.stop or ""),
            "schedule": [list(t) for t in tiers],
            "best_single_depth": best_single_depth(tiers, space.lattice),
            "levels": [lv.as_json() for lv in last.levels], "cells": last.cells_before,
            "max_cells": space.max_cells, "lattice": list(space.lattice),
            "coarse": list(space.coarse), "depths": list(space.depths),
            "max_repeats": space.max_repeats, "min_effect": space.min_effect,
            **({"prior": check} if (check := prior_check_depth(space, last.levels)) else {})}
