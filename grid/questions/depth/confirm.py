"""The depth search's confirmation (docs/search.md "The depth search"), pure: the schedule as
one server against its alternatives at one load per tier."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grid.analysis.depth import LevelState, Schedule, Throughput, schedule
from grid.analysis.search import Level, is_tie, nearest, sign
from grid.questions import steps as shared
from grid.questions.depth.steps import (
    By,
    DepthPoint,
    DepthSpace,
    DepthStep,
    best_single_depth,
    compare,
    depth_at,
    means,
    replay_depth,
)

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


def describe(point: Sequence[int]) -> str:
    """`c=16 depth 3`, `c=16 baseline repeat 1`, `c=16 schedule`, `c=16 adaptive`."""
    load, setting, repeat = point
    return f"c={load} {setting_name(setting)}" + (f" repeat {repeat}" if repeat else "")


def threshold_schedule(tiers: Schedule, lattice: Sequence[int]) -> Schedule | None:
    """The best single depth from batch 1, off from the schedule's first later depth-0 tier;
    None where that is a server the confirmation runs already."""
    single = best_single_depth(tiers, lattice)
    off = next((start for start, depth in tiers if depth == 0 and start > 1), None)
    if single is None or off is None:
        return None
    threshold = ((1, single), (off, 0))
    return None if tuple(tiers) == threshold else threshold


@dataclass(frozen=True)
class Comparison:
    against: int
    """The alternative's setting (0 = the baseline, a depth, THRESHOLD or ADAPTIVE)."""
    versus: Level | None
    """The schedule over the alternative (None until both are measured)."""
    verdict: str
    """beats, ties, loses, undecided, or pending (to measure)."""

    def as_json(self) -> dict:
        return {"against": setting_name(self.against), "verdict": self.verdict,
                **(self.versus.as_json() if self.versus is not None else {})}


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
class ScheduleConfirmStep:
    number: int
    points: tuple[DepthPoint, ...]
    why: str
    stop: str | None
    cells_before: int
    """Cells of the whole search before this step."""
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
    """(tier start, depth, load) per tier: the decided level nearest the tier's middle."""
    decided = sorted(lv.load for lv in levels if lv.best is not None)
    out = []
    for i, (start, depth) in enumerate(tiers):
        end = tiers[i + 1][0] if i + 1 < len(tiers) else math.inf
        span = [c for c in lattice if start <= c < end] or [start]
        inside = [c for c in decided if start <= c < end] or [nearest(decided, start)]
        out.append((start, depth, nearest(inside, math.sqrt(span[0] * span[-1]))))
    return out


def _check(space: DepthSpace, by: By, start: int, depth: int, load: int,
           others: Sequence[int]) -> tuple[TierCheck, list[DepthPoint]]:
    """One tier against each alternative at its load, and the points it still needs."""
    comparisons, todo = [], []
    for alt in others:
        pair = [(load, SCHEDULE), (load, alt)]
        missing = [k for k in pair if k not in by]
        if missing:
            todo += [(*k, 0) for k in missing]
            comparisons.append(Comparison(alt, None, "pending"))
            continue
        versus = compare(by, load, SCHEDULE, alt)
        # sign's `?` (repeats left) is pending; once it is a point estimate, a tie or undecided
        verdict = {"+": "beats", "-": "loses", "?": "pending"}.get(
            sign(versus, space.max_repeats, space.min_effect)) or (
            "ties" if is_tie(versus, space.min_effect) else "undecided")
        if verdict == "pending":
            low = min(len(by[k]) for k in pair)
            todo += [(*k, low) for k in pair if len(by[k]) == low]
        comparisons.append(Comparison(alt, versus, verdict))
    return TierCheck(start, depth, load, tuple(comparisons)), todo


def next_confirm_step(space: DepthSpace, confirm_cells: int, tiers: Schedule,
                      levels: Sequence[LevelState], adaptive: bool, by: By,
                      searched: set[DepthPoint], confirming: set[DepthPoint], number: int
                      ) -> ScheduleConfirmStep:
    """The next confirmation step; `searched`: the depth phase's points, `confirming` its own."""
    used = len(searched | confirming)
    single = best_single_depth(tiers, space.lattice)
    threshold = threshold_schedule(tiers, space.lattice)
    if single is None:
        return ScheduleConfirmStep(number, (), "the schedule never drafts: nothing to confirm",
                                   NOTHING, used)
    checks, todo = [], []
    for start, depth, load in confirm_loads(tiers, levels, space.lattice):
        others = [0] + ([single] if single != depth else []) + (
            [THRESHOLD] if threshold and depth_at(threshold, load) != depth else []) + (
            [ADAPTIVE] if adaptive else [])
        check, needs = _check(space, by, start, depth, load, others)
        checks.append(check)
        todo += needs
    todo = sorted(set(todo) - searched - confirming)
    if not todo:
        standing = sum(t.stands for t in checks)
        return ScheduleConfirmStep(number, (), f"every comparison decided: {standing} of "
                                   f"{len(checks)} tier(s) stand", CONFIRMED, used,
                                   tuple(checks), threshold)
    why = "confirm the schedule at " + ", ".join(
        f"c={t.load} (depth {t.depth}) against "
        + ", ".join(setting_name(c.against) for c in t.comparisons if c.verdict == "pending")
        for t in checks if any(c.verdict == "pending" for c in t.comparisons))
    spent = len(confirming - searched)
    points, why, stop = shared.fit(
        todo, confirm_cells - spent, why,
        f"{CONFIRM_STOPS[CONFIRM_BUDGET]} ({spent} of {confirm_cells})", CONFIRM_BUDGET,
        "cell(s)", "grid.search.confirm_cells")
    return ScheduleConfirmStep(number, points, why, stop, used, tuple(checks), threshold)


AnyDepthStep = DepthStep | ScheduleConfirmStep


def replay_all(space: DepthSpace, confirm_cells: int, adaptive: bool,
               measured: Mapping[DepthPoint, Throughput]) -> list[AnyDepthStep]:
    """The depth search's steps and, once it stops, the confirmation's."""
    searching = replay_depth(space, measured)
    last = searching[-1]
    if last.stop is None:
        return list(searching)
    searched = {p for s in searching for p in s.points}
    tiers = schedule(last.levels)

    def step_after(confirming: set[DepthPoint], number: int) -> ScheduleConfirmStep:
        by = means(measured, searched | confirming)
        return next_confirm_step(space, confirm_cells, tiers, last.levels, adaptive, by,
                                 searched, confirming, number)

    return [*searching, *shared.replay(step_after, measured, len(searching) + 1)]


def confirm_result(steps: Sequence[AnyDepthStep]) -> dict:
    """The confirmation part of the trace's result (empty while the search runs)."""
    last = steps[-1]
    if not isinstance(last, ScheduleConfirmStep):
        return {}
    return {"confirm_stop": last.stop, "confirm_stop_meaning": CONFIRM_STOPS.get(last.stop or ""),
            "threshold_schedule": [list(t) for t in last.threshold] if last.threshold else None,
            "tiers": [t.as_json() for t in last.checks],
            "stands": bool(last.checks) and all(t.stands for t in last.checks),
            "cells": last.cells_before}
