"""The smallest speedup a run can detect at each repeat count: the half-width of the speedup's
95 % interval (grid/analysis/verdict.py: an undetermined comparison says it), computed by the
analysis' own way of combining repeats (grid/analysis/repeats.py `combine`, pooled-t) on
replicates whose noise is set: within each cell a log-normal spread of sd `w` (a cell stopped
at a ±5 % precision target, as the default sweep's are: w = 5 % / 1.96), between repeats a
spread of sd `s`, pooled over the default sweep's 14 points (2 variants x 7 loads: 14 (R - 1)
degrees of freedom). Each figure is the mean over 20 seeds of the draw.

    python bench/detectable_speedup.py   # a few seconds

Scenarios: the default sweep on the simulator, whose starts draw no speed factor (its repeats
differ by their cells' own noise: s = w); a GPU run at the between-repeat spread measured on
real engines (docs/lesson.md: 5.8 % on a quiet machine, 13.5 % on a busy one)."""

from __future__ import annotations

import numpy as np

from grid.analysis.bootstrap import interval
from grid.analysis.repeats import NO_NOISE, RepeatNoise, combine
from grid.analysis.verdict import half_width as verdicts_half_width

POINTS = 14
WITHIN = 0.05 / 1.96
SCENARIOS = {"simulator, default sweep (s = w = 2.6 %)": WITHIN,
             "GPU, quiet machine (s = 5.8 %)": 0.058, "GPU, busy machine (s = 13.5 %)": 0.135}
REPEATS = (1, 2, 3, 5, 10)
B = 1000


def half_width(s: float, repeats: int, seed: int) -> float:
    """The speedup interval's half-width of two points of `repeats` repeats each, no true
    difference."""
    rng = np.random.default_rng(seed)
    noise = RepeatNoise(s ** 2, POINTS * (repeats - 1)) if repeats >= 2 else NO_NOISE
    # the repeats' values spread by exactly s (their own variance equals the pooled one)
    offsets = np.linspace(-1, 1, repeats) if repeats >= 2 else np.zeros(1)
    if repeats >= 2:
        offsets = offsets / np.std(offsets, ddof=1) * s
    values = 100 * np.exp(offsets)
    reps = []
    for side in ("a", "b"):
        own = [v * np.exp(rng.normal(0, WITHIN, B)) for v in values]
        reps.append(combine(values, own, "pooled_t", noise, f"{seed}:{side}"))
    return verdicts_half_width(*interval(reps[0] / reps[1] - 1))


def main() -> None:
    print(f"smallest detectable speedup (the 95 % interval's half-width, mean of 20 draws; "
          f"{POINTS} points pooled, within-cell sd {100 * WITHIN:.1f} %)")
    print(f"{'scenario':<42}" + "".join(f"{f'R={r}':>8}" for r in REPEATS))
    for name, s in SCENARIOS.items():
        widths = [float(np.mean([half_width(s, r, k) for k in range(20)])) for r in REPEATS]
        print(f"{name:<42}" + "".join(f"{100 * w:>7.1f}%" for w in widths))
    print("(R=1: within-run noise only, the between-repeat spread unmeasured and not covered)")


if __name__ == "__main__":
    main()
