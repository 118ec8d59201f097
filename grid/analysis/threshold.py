"""The threshold search (`grid.search.kind=threshold`, docs/search.md): which
`speculative_disable_above_batch` to set, among the values the engine can honour.

Pure, like grid/analysis/search.py, whose crossover search runs first (with `reserve` cells of
the budget kept back). From its levels:

1. rank: every value the engine tells apart (`Engine.threshold_values`: SGLang's speculative
   CUDA-graph capture sizes, every batch size on vLLM) inside the searched range, by predicted
   regret. A threshold T drafts at running batches <= T; below the crossover that keeps
   speed, above it that costs speed. With the speedup s piecewise linear in log2(load) between
   the measured levels (flat beyond the ends) and x* the crossover estimate, the regret of T is
   |integral of s from log2 T to log2 x*|: the speedup given up (T below x*) or the slowdown
   taken (T above x*), each doubling of load weighing the same, as the lattice does;
2. confirm: the top `candidates` values, sorted T1 < T2 < ..., differ pairwise only at running
   batches in (Ti, Ti+1]. Each adjacent pair is measured where they differ the most: the
   variant with Ti and the variant with Ti+1, both at concurrency Ti+1, where the first has
   switched speculation off (with whatever the engine still spends on a zero-step verify) and
   the second still drafts. A confirmation point (Ti, Ti+1, repeat) is those two cells; its
   "speedup" is Ti+1's throughput over Ti's, signed as a crossover level (+ - ? +p -p), with
   one more repeat while it is `?`;
3. the recommendation: walk up from T1 while the pair says the higher value wins (`+`, `+p`).

Stops: `confirmed` (every pair decided), `budget`, or the crossover search's own verdict when
there is nothing to rank: `below_range` (0: keep speculation off) and `above_range` (None: no
threshold needed within the range)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from grid.analysis.decision import crossover_of
from grid.analysis.search import (
    ABOVE_RANGE,
    BELOW_RANGE,
    BUDGET,
    STOP_REASONS,
    Level,
    Measured,
    Point,
    Space,
    Step,
    level_speedups,
    replay,
    sign,
)

CONFIRMED = "confirmed"
THRESHOLD_STOPS = {
    **STOP_REASONS,
    CONFIRMED: "every pair of top-ranked thresholds was measured where the two differ",
}

def reserve_cells(candidates: int, cells_per_point: int = 2) -> int:
    """Cells the crossover search leaves for the confirmation: one point per adjacent pair
    of the top `candidates`."""
    return cells_per_point * (candidates - 1)


Pair = tuple[int, int, int]
"""(lower threshold, higher threshold, repeat index): the variant with each threshold, both at
concurrency = the higher threshold."""


def describe_point(point: Sequence[int]) -> str:
    """`c=16`, `c=16 repeat 1`, or a confirmation pair's `off_above=28 vs 30 at c=30`."""
    if len(point) == 3:
        low, high, repeat = point
        return f"off_above={low} vs {high} at c={high}" + (f" repeat {repeat}" if repeat else "")
    load, repeat = point
    return f"c={load}" + (f" repeat {repeat}" if repeat else "")


@dataclass(frozen=True)
class Candidate:
    value: int
    regret: float
    """Predicted: |integral of the speedup from log2 value to log2 crossover| (module
    docstring); 0 at the crossover."""


def curve(levels: Mapping[int, Level]) -> tuple[np.ndarray, np.ndarray]:
    """The measured levels' loads and point speedups, ascending in load."""
    loads = np.array(sorted(levels), dtype=float)
    return loads, np.array([levels[int(c)].speedup for c in loads], dtype=float)


def rank(levels: Mapping[int, Level], honoured: Sequence[int], low: int, high: int
         ) -> list[Candidate]:
    """The honoured values in [low, high] by predicted regret (smallest first; the lower value
    on a tie: it risks less). Empty when the curve has no finite crossover."""
    loads, speedup = curve(levels)
    if len(loads) < 2:
        return []
    cross = crossover_of(loads, speedup)
    if not math.isfinite(cross):
        return []
    x = np.log2(loads)
    out = []
    for value in sorted({v for v in honoured if low <= v <= high}):
        u = np.linspace(math.log2(value), math.log2(cross), 257)
        s = np.interp(u, x, speedup)
        area = float(np.sum((s[1:] + s[:-1]) / 2 * np.diff(u)))  # trapezoid rule
        out.append(Candidate(value, abs(area)))
    return sorted(out, key=lambda c: (round(c.regret, 12), c.value))


@dataclass(frozen=True)
class ConfirmStep:
    """One step of the confirmation: pairs to measure (or why it stops), the ranking and the
    recommendation as known before the step."""

    number: int
    points: tuple[Pair, ...]
    why: str
    stop: str | None
    candidates: tuple[Candidate, ...]
    """Ranked, best first (the top ones are confirmed)."""
    threshold: int | None
    """The recommended speculative_disable_above_batch so far (None: none needed)."""
    cells_before: int
    signs: dict[str, str] = field(default_factory=dict)
    """Each measured pair's sign, keyed `T1->T2` (+: the higher threshold wins)."""
    phase: str = "confirm"

    def as_json(self) -> dict:
        out = asdict(self)
        out["points"] = [list(p) for p in self.points]
        out["candidates"] = [{"value": c.value, "regret": round(c.regret, 6)}
                             for c in self.candidates[:5]]  # the full ranking: the result's
        return out


def pair_levels(measured: Mapping[Pair, Measured], chosen: set[Pair]
                ) -> dict[tuple[int, int], Level]:
    """Per pair (T1, T2), the higher threshold's speedup over the lower's, over its repeats
    (Measured.base = the lower threshold's cell)."""
    by_pair: dict[tuple[int, int], dict[tuple[int, int], Measured]] = {}
    for a, b, r in chosen:
        if (a, b, r) in measured:
            by_pair.setdefault((a, b), {})[(b, r)] = measured[(a, b, r)]
    out = {}
    for pair, points in by_pair.items():
        out[pair] = level_speedups(points, points)[pair[1]]
    return out


def winner(top: Sequence[int], signs: Mapping[str, str]) -> int:
    """Walk up the sorted top values while each pair says the higher one wins."""
    best = top[0]
    for a, b in zip(top, top[1:], strict=False):
        if not signs.get(f"{a}->{b}", "").startswith("+"):
            break
        best = b
    return best


def confirm_step(space: Space, crossover: Step, levels: Mapping[int, Level],
                 honoured: Sequence[int], candidates: int,
                 measured: Mapping[tuple[int, int], Level], used: int, number: int
                 ) -> ConfirmStep:
    """The next confirmation step after the crossover search stopped (`crossover`)."""
    if crossover.stop in (BELOW_RANGE, ABOVE_RANGE):
        value = 0 if crossover.stop == BELOW_RANGE else None
        return ConfirmStep(number, (), f"{crossover.why}: nothing to rank", crossover.stop,
                           (), value, used)
    ranked = tuple(rank(levels, honoured, space.lattice[0], space.lattice[-1]))
    if not ranked:
        return ConfirmStep(number, (), "no finite crossover among the measured levels: "
                           "nothing to rank", BUDGET, (), None, used)
    top = sorted(c.value for c in ranked[:candidates])
    pairs = list(zip(top, top[1:], strict=False))
    signs = {f"{a}->{b}": sign(measured[(a, b)], space.max_repeats, space.min_effect)
             for a, b in pairs if (a, b) in measured}
    best = winner(top, signs)
    names = ", ".join(f"{c.value} ({c.regret:.3f})" for c in ranked[:candidates])
    todo: list[Pair] = []
    for a, b in pairs:
        if (a, b) not in measured:
            todo.append((a, b, 0))
        elif signs[f"{a}->{b}"] == "?":
            level = measured[(a, b)]
            more = min(space.points_per_step, space.max_repeats - level.repeats)
            todo += [(a, b, level.repeats + i) for i in range(more)]
    if not todo:
        return ConfirmStep(number, (), f"top candidates {names}: every pair decided, "
                           f"set speculative_disable_above_batch={best}", CONFIRMED, ranked,
                           best, used, signs)
    fit = max(0, (space.max_cells - used) // space.cells_per_point)
    why = (f"top candidates by predicted regret {names}: measure "
           + ", ".join(describe_point(p) for p in todo))
    if fit == 0:
        return ConfirmStep(number, (), f"{why}: not measured, {STOP_REASONS[BUDGET]} "
                           f"({used} of {space.max_cells} cells)", BUDGET, ranked, best, used,
                           signs)
    if fit < len(todo):
        why += f" (only {fit} of {len(todo)} point(s) fit the budget)"
        todo = todo[:fit]
    return ConfirmStep(number, tuple(todo), why, None, ranked, best, used, signs)


def replay_threshold(space: Space, reserve: int, honoured: Sequence[int], candidates: int,
                     measured: Mapping[Point, Measured], confirmed: Mapping[Pair, Measured]
                     ) -> list[Step | ConfirmStep]:
    """Every step of a threshold search from the measured points: the crossover search within
    max_cells - reserve (grid/analysis/search.py `replay`), then the confirmation steps. The
    last step is a stop or the one whose points are not all measured yet."""
    crossing = replay(replace(space, max_cells=space.max_cells - reserve), measured)
    steps: list[Step | ConfirmStep] = list(crossing)
    last = crossing[-1]
    if last.stop is None:
        return steps
    chosen_points = {p for s in crossing for p in s.points}
    levels = level_speedups(measured, chosen_points)
    used = sum(lv.repeats for lv in levels.values()) * space.cells_per_point
    chosen: set[Pair] = set()
    while True:
        done = pair_levels(confirmed, chosen)
        spent = used + sum(lv.repeats for lv in done.values()) * space.cells_per_point
        step = confirm_step(space, last, levels, honoured, candidates, done, spent,
                            len(steps) + 1)
        steps.append(step)
        if step.stop is not None or not all(p in confirmed for p in step.points):
            return steps
        chosen.update(step.points)



def threshold_result(steps: Sequence[Step | ConfirmStep]) -> dict:
    """The threshold part of the trace's result (empty while the crossover search runs)."""
    last = steps[-1]
    if not isinstance(last, ConfirmStep):
        return {}
    return {"threshold": last.threshold, "threshold_stop": last.stop,
            "threshold_stop_meaning": THRESHOLD_STOPS.get(last.stop or ""),
            "candidates": [{"value": c.value, "regret": round(c.regret, 6)}
                           for c in last.candidates]}
