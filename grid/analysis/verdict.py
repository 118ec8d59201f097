"""Three verdicts, always (`faster`, `slower`, `undetermined`), what an undecided one would cost
to settle (about R x (half-width / effect)^2 repeats), the threshold read from the verdicts alone
(`recommend_threshold`, a fixed-sequence test) and Holm's step-down over the run's significant
comparisons (`holm`, on the bootstrap's `p_value`): docs/report.md ("Three verdicts", "Many
comparisons")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from grid.analysis.points import fmt_load

FASTER, SLOWER, UNDETERMINED = "faster", "slower", "undetermined"
WITHIN_ONLY = "undetermined (within-run noise only)"
"""The verdict of a comparison whose interval covers within-run noise alone (one repeat per
cell and no stated spread between repeats): its sign does not count, whatever the interval."""
Z95 = 1.959963984540054
MOST_REPEATS = 100
"""Past this many repeats the cost is given as "over 100" (an effect that small is not worth
settling by repeats)."""
RULE = "an interval's half-width shrinks about as 1/sqrt(repeats)"


def verdict_of(lo: float, hi: float) -> str:
    """`faster` when the interval lies above zero, `slower` below it, else `undetermined` (also
    when an end is not finite)."""
    if math.isfinite(lo) and math.isfinite(hi):
        if lo > 0:
            return FASTER
        if hi < 0:
            return SLOWER
    return UNDETERMINED


def between_runs(value: float, lo: float, hi: float, spread: float | None
                 ) -> tuple[float, float]:
    """A ratio of two cells' throughputs measured once each (its 95 % interval [lo, hi] from
    within-run noise), widened by the spread between repeats: each cell's throughput varies from
    run to run with relative standard deviation `spread`, so the ratio by spread x sqrt(2),
    95 %: z x spread x sqrt(2) x value, added to each side of the interval in quadrature.
    None (no spread stated): the interval as measured."""
    if spread is None:
        return lo, hi
    extra = Z95 * spread * math.sqrt(2) * value
    return value - math.hypot(value - lo, extra), value + math.hypot(hi - value, extra)


def judged(value: float, lo: float, hi: float, spread: float | None) -> tuple[str, float, float]:
    """A speedup ratio's verdict against 1 with the interval it rests on: widened by a stated
    spread between repeats (`between_runs`), or, with none (None), WITHIN_ONLY and the
    within-run interval as measured."""
    if spread is None:
        return WITHIN_ONLY, lo, hi
    lo, hi = between_runs(value, lo, hi, spread)
    return verdict_of(lo - 1.0, hi - 1.0), lo, hi


def p_value(replicates: np.ndarray) -> float:
    """The bootstrap's two-sided p-value of zero: twice the smaller share of finite replicates
    at or below and at or above zero, each counted as (k + 1) / (B + 1) so it is never 0; 1
    without a finite replicate."""
    reps = np.asarray(replicates, dtype=float)
    reps = reps[np.isfinite(reps)]
    if not reps.size:
        return 1.0
    tail = min(int((reps <= 0).sum()), int((reps >= 0).sum()))
    return min(1.0, 2 * (tail + 1) / (reps.size + 1))


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down: which of m comparisons stay significant with the chance of any false
    one held at `alpha`: the k-th smallest p (k from 0) must be at most alpha / (m - k), and
    the first that is not ends the list."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    keep = [False] * len(pvalues)
    for k, i in enumerate(order):
        if not pvalues[i] <= alpha / (len(pvalues) - k):
            break
        keep[i] = True
    return keep


def half_width(lo: float, hi: float) -> float:
    """The smallest effect the interval could have told from zero: (hi - lo) / 2."""
    return (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else math.nan


def repeats_to_resolve(half: float, effect: float, repeats: int) -> int | None:
    """About how many repeats would bring the half-width below |effect| (RULE): ceil(R (h /
    |d|)^2), at least R + 1; None when it cannot be said (no finite width, no effect, or over
    MOST_REPEATS)."""
    if not (math.isfinite(half) and math.isfinite(effect)) or effect == 0 or repeats < 1:
        return None
    need = max(repeats + 1, math.ceil(repeats * (half / abs(effect)) ** 2))
    return need if need <= MOST_REPEATS else None


def pct(x: float) -> str:
    return f"{100 * x:+.0f} %" if math.isfinite(x) else "?"


def cost_text(speedup: float, lo: float, hi: float, repeats: int, short: bool = False) -> str:
    """`the run could not detect an effect smaller than ±8 %; about 8 repeats would resolve +3
    % (an interval's half-width shrinks about as 1/sqrt(repeats))`; `short`: `±8 %: about 8
    repeats would resolve +3 %` (for a list that states the rule once)."""
    half = half_width(lo, hi)
    if not math.isfinite(half):
        return "no interval to judge it by"
    need = repeats_to_resolve(half, speedup, max(1, int(repeats)))
    width = f"±{100 * half:.0f} %" if short else (
        f"the run could not detect an effect smaller than ±{100 * half:.0f} %")
    rule = "" if short else f" ({RULE})"
    if need is None:
        return (f"{width}{':' if short else ';'} an effect as small as its point estimate "
                f"({pct(speedup)}) would take over {MOST_REPEATS} repeats to resolve{rule}")
    return f"{width}{':' if short else ';'} about {need} repeats would resolve {pct(speedup)}{rule}"


class Curve(Protocol):
    """What a recommendation needs of a speedup curve (decision.py's Crossover has it)."""

    variant: str
    workload: str
    load_kind: str


def _loads(rows: pd.DataFrame, verdict: str) -> str:
    return ", ".join(fmt_load("concurrency", c) for c in rows[rows.verdict == verdict].load)


def _settle(row: pd.Series) -> str:
    """`c=4 +3 % [-5 %, +11 %]: the run could not detect ...; about 8 repeats would ...`."""
    return (f"{fmt_load('concurrency', row.load)} {pct(row.speedup)} [{pct(row.lo)}, "
            f"{pct(row.hi)}]: {cost_text(row.speedup, row.lo, row.hi, int(row.repeats))}")


def recommend_threshold(table: pd.DataFrame, cross: Curve) -> dict:
    """The recommended speculative_disable_above_batch for one speculative variant and
    workload (closed loop: the running batch follows the concurrency), from the verdicts
    alone (grid/analysis/verdict.py), never from a point estimate: the end of the contiguous
    range of significantly-faster loads from the lowest, with its plausible range (up to the
    last load before the first significantly-slower one above it; `None` at the top: it may
    lie above the tested range). `verdict`: `always` (every load faster: no threshold within
    the tested range, value None), `threshold`, `off` (the lowest load is significantly slower:
    0, keep it off), `undetermined` (the lowest load is undetermined: value None, never 0, with
    `undetermined` = the plausible range and the repeats that would settle it)."""
    rows = table[(table.variant == cross.variant) & (table.workload == cross.workload)
                 & (table.load_kind == cross.load_kind)].sort_values("load")
    verdicts = rows.verdict.tolist()
    run = next((i for i, v in enumerate(verdicts) if v != FASTER), len(verdicts))
    slower_after = [i for i in range(run, len(verdicts)) if verdicts[i] == SLOWER]
    loads = [int(c) for c in rows.load]
    top = loads[slower_after[0] - 1] if slower_after and slower_after[0] > 0 else None
    out = {"variant": cross.variant, "workload": cross.workload}
    if run == len(verdicts):
        return {**out, "verdict": "always", "speculative_disable_above_batch": None,
                "plausible_range": [loads[-1], None],
                "statement": (f"speculation is significantly faster at every tested concurrency "
                              f"up to {loads[-1]}: no threshold needed within the tested range "
                              f"(test higher concurrency)")}
    slower = _loads(rows, SLOWER)
    if run == 0 and verdicts[0] == SLOWER:
        return {**out, "verdict": "off", "speculative_disable_above_batch": 0,
                "plausible_range": [0, 0],
                "statement": (f"speculation is significantly slower already at the lowest "
                              f"tested concurrency (slower at {slower}): keep it off "
                              f"(speculative_disable_above_batch=0, i.e. use the baseline)")}
    first = rows.iloc[run]  # the first load not significantly faster: the one to settle
    upper = f"{loads[-1]} or above" if top is None else str(top)
    beyond = f"; slower at {slower}" if slower else ""
    if run == 0:
        faster = _loads(rows, FASTER)
        beyond = (f"; faster at {faster}" if faster else "") + beyond
        return {**out, "verdict": "undetermined", "speculative_disable_above_batch": None,
                "plausible_range": [0, top], "undetermined": [0, top],
                "settle": {"load": loads[0], "repeats": repeats_to_resolve(
                    half_width(first.lo, first.hi), first.speedup, int(first.repeats))},
                "statement": (f"undetermined: speculation is not significantly faster at the "
                              f"lowest tested concurrency ({_settle(first)}){beyond}; the "
                              f"threshold lies between 0 and {upper}")}
    rec = loads[run - 1]
    settle = (f"; undetermined at {_loads(rows, UNDETERMINED)} ({_settle(first)})"
              if first.verdict == UNDETERMINED else "")
    return {**out, "verdict": "threshold", "speculative_disable_above_batch": rec,
            "plausible_range": [rec, top],
            "statement": (f"set speculative_disable_above_batch={rec}: significantly faster at "
                          f"every tested concurrency up to {rec}{settle}{beyond}; plausible "
                          f"range {rec} to {upper}")}
