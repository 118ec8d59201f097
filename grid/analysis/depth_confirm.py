"""The depth search's confirmation (docs/search.md): the schedule the search found, run as ONE
server (`variant.speculative_depth`), against what an operator would run instead, at one load
per tier; the recommendation stands only where its intervals say so.

Pure, like grid/analysis/depth.py, whose search runs first. For each tier of the schedule (a
run of lattice levels with one depth), at its decided level nearest the tier's geometric middle,
the schedule's server is compared with:

- the baseline (depth 0): always, also at a depth-0 tier, whose zero-step verify is not the
  baseline's plain decode;
- the best single depth (the static speculative depth the schedule gives at the most lattice
  levels), where the tier's depth is another one;
- the threshold schedule (`threshold_schedule`: the best single depth switched off where the
  schedule first turns speculation off, what the on/off question of the threshold search
  answers from the same evidence), where its depth at the tier's load is another one;
- the engine's own runtime adaptation with its default tiers (SGLang and the simulator:
  `variant.speculative_adaptive`), where the engine has one.

A confirmation point is (load, setting, repeat): a setting >= 0 is that static depth's cell (the
search's own, reused when it measured it), SCHEDULE, THRESHOLD and ADAPTIVE are the servers
above.
Each comparison is the schedule over the alternative, T_s / T_a - 1 with its bootstrap
interval: `beats` (above 0), `loses` (below 0), `ties` (within ±min_effect), else one more
repeat of both while repeats are left, then `undecided`. A tier stands when it beats or ties
every alternative. Stops: `confirmed` (every comparison decided), `confirm_budget`
(grid.search.confirm_cells spent) or `nothing_to_confirm` (a schedule that never drafts: serve
the baseline)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grid.analysis.depth import (
    DepthPoint,
    DepthSpace,
    DepthStep,
    LevelState,
    Schedule,
    Throughput,
    best_single_depth,
    compare,
    depth_at,
    is_tie,
    means,
    nearest,
    replay_depth,
    schedule,
)
from grid.analysis.search import Level

SCHEDULE = -1
"""The schedule's server (the variant with speculative_depth)."""
ADAPTIVE = -2
"""The engine's runtime adaptation with its default tiers (speculative_adaptive)."""
THRESHOLD = -3
"""The threshold schedule's server (the variant with speculative_depth = threshold_schedule)."""
CONFIRMED = "confirmed"
CONFIRM_BUDGET = "confirm_budget"
NOTHING = "nothing_to_confirm"
CONFIRM_STOPS = {
    CONFIRMED: "every comparison of the schedule with its alternatives is decided",
    CONFIRM_BUDGET: "grid.search.confirm_cells is spent before every comparison was decided",
    NOTHING: "the schedule drafts at no load: serve the baseline",
}


def setting_name(setting: int) -> str:
    return {SCHEDULE: "schedule", ADAPTIVE: "adaptive", THRESHOLD: "threshold",
            0: "baseline"}.get(setting, f"depth {setting}")


def threshold_schedule(tiers: Schedule, lattice: Sequence[int]) -> Schedule | None:
    """The on/off schedule the same evidence gives: the best single depth from batch 1, off
    (depth 0) from the schedule's first depth-0 tier after batch 1. None where that is no
    other server than one the confirmation already runs: a schedule without such a tier (the
    threshold schedule is the best single depth everywhere) or one that is on/off already."""
    single = best_single_depth(tiers, lattice)
    off = next((start for start, depth in tiers if depth == 0 and start > 1), None)
    if single is None or off is None:
        return None
    threshold = ((1, single), (off, 0))
    return None if tuple(tiers) == threshold else threshold


def describe(point: Sequence[int]) -> str:
    """`c=16 schedule`, `c=16 adaptive repeat 1`, `c=4 depth 5`."""
    load, setting, repeat = point
    return f"c={load} {setting_name(setting)}" + (f" repeat {repeat}" if repeat else "")


@dataclass(frozen=True)
class Comparison:
    against: int
    """The alternative's setting (0 = the baseline, a depth, or ADAPTIVE)."""
    versus: Level | None
    """The schedule over the alternative (None until both are measured)."""
    verdict: str
    """beats, ties, loses, undecided, or pending (to measure)."""

    def as_json(self) -> dict:
        out: dict = {"against": setting_name(self.against), "verdict": self.verdict}
        if self.versus is not None:
            out.update(speedup=_round(self.versus.speedup),
                       interval=[_round(self.versus.lo), _round(self.versus.hi)],
                       repeats=self.versus.repeats)
        return out


def _round(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


@dataclass(frozen=True)
class TierCheck:
    start: int
    depth: int
    load: int
    """Where the tier is confirmed."""
    comparisons: tuple[Comparison, ...]

    @property
    def stands(self) -> bool:
        return all(c.verdict in ("beats", "ties") for c in self.comparisons)

    def as_json(self) -> dict:
        return {"from": self.start, "depth": self.depth, "load": self.load,
                "stands": self.stands, "comparisons": [c.as_json() for c in self.comparisons]}


@dataclass(frozen=True)
class ConfirmStep:
    number: int
    points: tuple[DepthPoint, ...]
    why: str
    stop: str | None
    cells_before: int
    """Cells of the whole search before this step (the depth phase's and the confirmation's)."""
    checks: tuple[TierCheck, ...] = ()
    threshold: Schedule | None = None
    """The threshold schedule compared (threshold_schedule), if any."""
    phase: str = "confirm"

    def as_json(self) -> dict:
        return {"number": self.number, "phase": self.phase,
                "points": [list(p) for p in self.points], "why": self.why, "stop": self.stop,
                "cells_before": self.cells_before,
                "tiers": [t.as_json() for t in self.checks],
                "threshold_schedule": [list(t) for t in self.threshold] if self.threshold
                else None}


def confirm_loads(tiers: Schedule, levels: Sequence[LevelState], lattice: Sequence[int]
                  ) -> list[tuple[int, int, int]]:
    """(tier start, depth, load) per tier: the decided level inside the tier nearest the
    geometric middle of the tier's lattice levels."""
    decided = sorted(lv.load for lv in levels if lv.best is not None)
    out = []
    for i, (start, depth) in enumerate(tiers):
        end = tiers[i + 1][0] if i + 1 < len(tiers) else math.inf
        span = [c for c in lattice if start <= c < end] or [start]
        inside = [c for c in decided if start <= c < end] or [nearest(decided, start)]
        out.append((start, depth, nearest(inside, math.sqrt(span[0] * span[-1]))))
    return out


def _verdict(level: Level, space: DepthSpace) -> str:
    if level.lo > 0:
        return "beats"
    if level.hi < 0:
        return "loses"
    if is_tie(level, space.min_effect):
        return "ties"
    return "pending" if level.repeats < space.max_repeats else "undecided"


def next_confirm_step(space: DepthSpace, confirm_cells: int, tiers: Schedule,
                      levels: Sequence[LevelState], adaptive: bool,
                      by: Mapping[tuple[int, int], list[Throughput]], searched: set[DepthPoint],
                      confirming: set[DepthPoint], number: int) -> ConfirmStep:
    """The next confirmation step (module docstring); `searched` are the depth phase's
    chosen points, `confirming` the confirmation's own so far."""
    used = len(searched | confirming)
    single = best_single_depth(tiers, space.lattice)
    threshold = threshold_schedule(tiers, space.lattice)
    if single is None:
        return ConfirmStep(number, (), "the schedule never drafts: nothing to confirm", NOTHING,
                           used)
    checks, todo = [], []
    for start, depth, load in confirm_loads(tiers, levels, space.lattice):
        others = [0] + ([single] if single != depth else []) + (
            [THRESHOLD] if threshold and depth_at(threshold, load) != depth else []) + (
            [ADAPTIVE] if adaptive else [])
        comparisons = []
        for alt in others:
            pair = [(load, s) for s in (SCHEDULE, alt)]
            missing = [k for k in pair if k not in by]
            if missing:
                todo += [(k[0], k[1], 0) for k in missing]
                comparisons.append(Comparison(alt, None, "pending"))
                continue
            versus = compare(by, load, SCHEDULE, alt)
            verdict = _verdict(versus, space)
            if verdict == "pending":
                low = min(len(by[k]) for k in pair)
                todo += [(k[0], k[1], low) for k in pair if len(by[k]) == low]
            comparisons.append(Comparison(alt, versus, verdict))
        checks.append(TierCheck(start, depth, load, tuple(comparisons)))
    todo = sorted(set(todo) - searched - confirming)
    if not todo:
        standing = sum(t.stands for t in checks)
        return ConfirmStep(number, (), f"every comparison decided: {standing} of {len(checks)} "
                           "tier(s) stand", CONFIRMED, used, tuple(checks), threshold)
    why = "confirm the schedule at " + ", ".join(
        f"c={t.load} (depth {t.depth}) against "
        + ", ".join(setting_name(c.against) for c in t.comparisons
                    if c.verdict == "pending") for t in checks
        if any(c.verdict == "pending" for c in t.comparisons))
    spent = len(confirming - searched)
    fit = max(0, confirm_cells - spent)
    if fit == 0:
        return ConfirmStep(number, (), f"{why}: not measured, {CONFIRM_STOPS[CONFIRM_BUDGET]} "
                           f"({spent} of {confirm_cells})", CONFIRM_BUDGET, used, tuple(checks),
                           threshold)
    if fit < len(todo):
        why += f" (only {fit} of {len(todo)} cell(s) fit grid.search.confirm_cells)"
        todo = todo[:fit]
    return ConfirmStep(number, tuple(todo), why, None, used, tuple(checks), threshold)


AnyDepthStep = DepthStep | ConfirmStep


def replay_all(space: DepthSpace, confirm_cells: int, adaptive: bool,
               measured: Mapping[DepthPoint, Throughput]) -> list[AnyDepthStep]:
    """The depth search (grid/analysis/depth.py `replay_depth`) and, once it stops, the
    confirmation of its schedule; the last step is a stop or the one still to measure."""
    searching = replay_depth(space, measured)
    steps: list[AnyDepthStep] = list(searching)
    last = searching[-1]
    if last.stop is None:
        return steps
    searched = {p for s in searching for p in s.points}
    tiers = schedule(last.levels)
    confirming: set[DepthPoint] = set()
    while True:
        by = means(measured, searched | confirming)
        step = next_confirm_step(space, confirm_cells, tiers, last.levels, adaptive, by,
                                 searched, confirming, len(steps) + 1)
        steps.append(step)
        if step.stop is not None or not all(p in measured for p in step.points):
            return steps
        confirming.update(step.points)


def confirm_result(steps: Sequence[AnyDepthStep]) -> dict:
    """The confirmation part of the trace's result (empty while the search runs)."""
    last = steps[-1]
    if not isinstance(last, ConfirmStep):
        return {}
    return {"confirm_stop": last.stop, "confirm_stop_meaning": CONFIRM_STOPS.get(last.stop or ""),
            "threshold_schedule": [list(t) for t in last.threshold] if last.threshold else None,
            "tiers": [t.as_json() for t in last.checks],
            "stands": bool(last.checks) and all(t.stands for t in last.checks),
            "cells": last.cells_before}
