"""Three verdicts, always, and what an undecided one would cost to settle. A comparison's 95 %
interval gives `faster` (above zero), `slower` (below zero) or `undetermined` (it holds zero);
an undetermined comparison is not evidence of no difference: it says the run could not detect
an effect smaller than its interval's half-width, and how many repeats would resolve the effect
its point estimate shows. The rule: an interval's half-width shrinks about as 1/sqrt(repeats)
(the standard error of a mean of R repeats), so resolving an effect d with a half-width h at R
repeats takes about R x (h / d)^2. It is a guide, not a promise: with one repeat the interval
covers within-run noise only, and the first repeats add the noise between runs it left out."""

from __future__ import annotations

import math

FASTER, SLOWER, UNDETERMINED = "faster", "slower", "undetermined"
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
