"""Repeats of a cell (the `repeat` axis) combined into one estimate whose bootstrap replicates
cover what varies between repeats, not only the requests within each. Pure: numpy and scipy.
The three ways (`within`, `bootstrap`, `pooled_t`, the default), their pooling and degrees of
freedom, and their coverage: docs/report.md (the repeats' table)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from grid.analysis.bootstrap import seed_for

RepeatMethod = Literal["pooled_t", "bootstrap", "within"]
Values = Sequence[float] | np.ndarray
"""One point's repeats' values."""
METHODS: tuple[RepeatMethod, ...] = ("within", "bootstrap", "pooled_t")
"""Every way of combining repeats, the one used last (bench/coverage_repeats.py compares them)."""


@dataclass(frozen=True)
class RepeatNoise:
    """The between-repeat noise of a run's points, pooled."""

    variance: float
    """Pooled variance of log values: Σ over points Σ over repeats (log v_r - mean log v)² / dof."""
    dof: int
    """Degrees of freedom: Σ over points with two or more repeats (R - 1); 0 = none."""

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance) if self.dof else math.nan


NO_NOISE = RepeatNoise(0.0, 0)
LOG_CAP = 300.0
"""The largest log shift a pooled-t replicate is given (e^300 ~ 1e130: finite, and a ratio of
two such still is)."""


def relative_deviations(values: Values) -> np.ndarray:
    """Each repeat's log value minus the point's mean log value (empty unless every value is
    finite and positive: nothing relative to measure)."""
    v = np.asarray(values, dtype=float)
    if not v.size or not np.all(np.isfinite(v) & (v > 0)):
        return np.empty(0)
    logs = np.log(v)
    return logs - logs.mean()


def pooled(groups: Sequence[Values]) -> RepeatNoise:
    """The between-repeat relative variance pooled over points (each a sequence of its
    repeats' values; points with fewer than two repeats add nothing)."""
    squares, dof = 0.0, 0
    for values in groups:
        d = relative_deviations(values)
        if d.size >= 2:
            squares += float(np.sum(d ** 2))
            dof += d.size - 1
    return RepeatNoise(squares / dof, dof) if dof else NO_NOISE


def own_variance(values: Values) -> float:
    """One point's relative variance over its repeats (0 with fewer than two)."""
    d = relative_deviations(values)
    return float(np.sum(d ** 2) / (d.size - 1)) if d.size >= 2 else 0.0


def above(variance: float, dof: int, noise: RepeatNoise) -> bool:
    """A variance estimated with `dof` degrees of freedom is above `noise`'s by more than F's
    95 % point at (dof, noise.dof): more than chance makes it."""
    if dof < 1 or not noise.dof or variance <= noise.variance:
        return False
    from scipy.stats import f as fisher  # here: scipy.stats adds ~0.7 s to a CLI start
    return variance > noise.variance * float(fisher.ppf(0.95, dof, noise.dof))


def by_variant(groups: Mapping[str, Sequence[Values]]) -> dict[str, RepeatNoise]:
    """Each variant's between-repeat noise (`groups`: variant -> its points' repeats' values):
    the run's pooled, or the variant's own pooled where its variance is above the pooled of the
    run's other variants by more than F's 95 % point (`above`): a server configuration whose
    starts vary more is not hidden by the others, and one that varies less keeps the run's
    figure (never narrower)."""
    run = pooled([v for values in groups.values() for v in values])
    out = {}
    for name, values in groups.items():
        mine = pooled(values)
        rest = pooled([v for other, vs in groups.items() if other != name for v in vs])
        out[name] = mine if above(mine.variance, mine.dof, rest) else run
    return out


def scale_of(values: Values, noise: RepeatNoise) -> tuple[float, int]:
    """The variance and degrees of freedom one point's pooled-t draw uses: the larger of the
    pooled variance and the point's own (a cell whose repeats disagree is not hidden by the
    others), with the pooled degrees of freedom, or the point's own (R - 1) where its variance
    is above the pooled by more than F's 95 % point at (R - 1, pooled dof): a variance
    estimated from two disagreeing repeats is as uncertain as two repeats make it, so such a
    pair gets t's 12.71 at one degree of freedom, not the pooled ~2. A point above the pooled
    by chance only (about half of them when every point shares one noise) keeps the pooled
    degrees: its own would give it t at R - 1 degrees, an interval several times wider for
    noise the pooled estimate already holds."""
    own = own_variance(values)
    dof = len(relative_deviations(values)) - 1
    if above(own, dof, noise):
        return own, dof
    return max(own, noise.variance), noise.dof


def combine(values: Values, replicates: Sequence[np.ndarray], method: RepeatMethod,
            noise: RepeatNoise, key: str) -> np.ndarray:
    """The replicates of the mean over repeats (`values[r]` measured with `replicates[r]`),
    by `method` (docs/report.md). `key` seeds the draws: the same point gets the same
    replicates in any order or run."""
    reps = np.stack([np.asarray(r, dtype=float) for r in replicates])  # (R, B)
    within = reps.mean(axis=0)
    count = reps.shape[0]
    if method == "within":
        return within
    rng = np.random.default_rng(seed_for(f"repeats:{method}:{key}"))
    if method == "bootstrap":
        if count < 2:
            return within
        drawn = rng.integers(0, count, size=(reps.shape[1], count))
        return np.take_along_axis(reps.T, drawn, axis=1).mean(axis=1)
    if not noise.dof:
        return within
    variance, dof = scale_of(values, noise)
    from scipy.stats import t as student_t  # here: scipy.stats adds ~0.7 s to a CLI start
    shift = student_t.rvs(dof, size=reps.shape[1], random_state=rng)
    # t at one degree of freedom has tails past any float's exp: the log shift is held to
    # ±LOG_CAP, far beyond any percentile the intervals read, so no replicate becomes 0 or inf
    log_shift = np.clip(math.sqrt(variance / count) * shift, -LOG_CAP, LOG_CAP)
    return within * np.exp(log_shift)


def disagree(intervals: Sequence[tuple[float, float]]) -> bool:
    """Two or more repeats whose own intervals do not overlap (the highest lower end above
    the lowest upper end): they measured different things, not the same thing noisily."""
    finite = [(lo, hi) for lo, hi in intervals if math.isfinite(lo) and math.isfinite(hi)]
    if len(finite) < 2:
        return False
    return max(lo for lo, _ in finite) > min(hi for _, hi in finite)
