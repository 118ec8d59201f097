"""How repeats combine (grid/analysis/repeats.py): the pooled between-repeat noise, each
method's replicates, and when repeats disagree; every expected value worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grid.analysis.repeats import (
    NO_NOISE,
    RepeatNoise,
    by_variant,
    combine,
    disagree,
    own_variance,
    pooled,
    scale_of,
)

E = math.e


def test_pooled_noise_by_hand():
    # Logs of 100 and 100 e^0.2 sit 0.1 either side of their mean: squares 0.01 + 0.01 = 0.02,
    # 1 degree of freedom. Logs of 100 e^-0.1, 100, 100 e^0.1: squares 0.02 again, 2 degrees.
    # Pooled: 0.04 / 3. A point of one repeat adds nothing; a zero value has no log.
    noise = pooled([[100, 100 * E ** 0.2], [100 * E ** -0.1, 100, 100 * E ** 0.1], [50],
                    [0.0, 10.0]])
    assert noise.dof == 3
    assert noise.variance == pytest.approx(0.04 / 3)
    assert own_variance([100, 100 * E ** 0.2]) == pytest.approx(0.02)
    assert own_variance([100]) == 0.0
    assert pooled([[1.0], [2.0]]) == NO_NOISE and math.isnan(NO_NOISE.sd)


def test_within_is_the_mean_of_the_repeats_replicates():
    reps = [np.array([1.0, 2.0, 3.0]), np.array([3.0, 4.0, 5.0])]
    assert combine([2, 4], reps, "within", NO_NOISE, "k").tolist() == [2.0, 3.0, 4.0]


def test_two_level_bootstrap_draws_repeats_with_replacement():
    # Two repeats with constant replicates 10 and 20: a replicate draws two of them, so it is
    # 10 (both the first, 1/4), 15 (one each, 1/2) or 20 (both the second, 1/4).
    b = 4000
    reps = [np.full(b, 10.0), np.full(b, 20.0)]
    out = combine([10, 20], reps, "bootstrap", NO_NOISE, "k")
    assert set(np.unique(out)) == {10.0, 15.0, 20.0}
    share = {v: float(np.mean(out == v)) for v in (10.0, 15.0, 20.0)}
    assert share[15.0] == pytest.approx(0.5, abs=0.03)
    assert share[10.0] == pytest.approx(0.25, abs=0.03)
    # It can never leave [min, max] of the repeats: the reason it is not the default.
    assert out.min() >= 10 and out.max() <= 20


def test_pooled_t_widens_by_the_t_quantile_over_root_r():
    # Constant replicates (no within noise): log(out / 100) is sd / sqrt(R) times Student's t.
    # sd 0.1, R = 2, 10 degrees of freedom: t's 97.5 % point is 2.228, so the 95 % interval of
    # the log is ±2.228 x 0.1 / 1.414 = ±0.1576.
    b = 40000
    reps = [np.full(b, 100.0), np.full(b, 100.0)]
    out = combine([100, 100], reps, "pooled_t", RepeatNoise(0.01, 10), "k")
    lo, hi = np.percentile(np.log(out / 100), [2.5, 97.5])
    assert (lo, hi) == pytest.approx((-0.1576, 0.1576), abs=0.006)
    # Nothing pooled (one repeat everywhere): the within replicates, unchanged.
    assert combine([100], [np.full(5, 7.0)], "pooled_t", NO_NOISE, "k").tolist() == [7.0] * 5


def test_a_disagreeing_pair_takes_its_own_variance_and_its_own_degree_of_freedom():
    # Logs 0 and 0.6 sit 0.3 either side of their mean: own variance 0.18 (1 degree), above the
    # pooled 0.01 (10 degrees). The draw's scale: sqrt(0.18 / 2) = 0.3; its t at one degree of
    # freedom, whose 97.5 % point is 12.71 (t_{0.975,1} = tan(0.475 pi)), not the pooled
    # 10 degrees' 2.228: the 95 % interval of the log is ±12.71 x 0.3 = ±3.81.
    spread = [100.0, 100 * E ** 0.6]
    assert scale_of(spread, RepeatNoise(0.01, 10)) == (pytest.approx(0.18), 1)
    assert scale_of([100.0, 100 * E ** 0.02], RepeatNoise(0.01, 10)) == (0.01, 10)
    # Above the pooled by chance only: logs 0 and 0.16 -> own 0.0128, 1.28 x the pooled 0.01,
    # under F's 95 % point at (1, 10) degrees, 4.96: its variance, the pooled 10 degrees.
    # Logs 0 and 0.32 -> 0.0512, 5.12 x: above 4.96, its own degree.
    assert scale_of([100.0, 100 * E ** 0.16], RepeatNoise(0.01, 10)) == (pytest.approx(0.0128),
                                                                         10)
    assert scale_of([100.0, 100 * E ** 0.32], RepeatNoise(0.01, 10)) == (pytest.approx(0.0512), 1)
    b = 200_000
    out = combine(spread, [np.full(b, v) for v in spread], "pooled_t", RepeatNoise(0.01, 10), "k")
    centre = (100 + 100 * E ** 0.6) / 2
    lo, hi = np.percentile(np.log(out / centre), [2.5, 97.5])
    assert hi / 0.3 == pytest.approx(12.71, rel=0.04)
    assert lo / 0.3 == pytest.approx(-12.71, rel=0.04)


def test_the_same_key_gives_the_same_replicates():
    reps = [np.arange(100.0), np.arange(100.0) + 5]
    a = combine([50, 55], reps, "pooled_t", RepeatNoise(0.01, 4), "x")
    assert np.array_equal(a, combine([50, 55], reps, "pooled_t", RepeatNoise(0.01, 4), "x"))
    assert not np.array_equal(a, combine([50, 55], reps, "pooled_t", RepeatNoise(0.01, 4), "y"))


def test_repeats_disagree_when_their_intervals_do_not_overlap():
    assert disagree([(370, 390), (690, 720)])          # 690 > 390
    assert not disagree([(370, 400), (390, 420)])      # 390 <= 400: they overlap
    assert disagree([(1, 2), (1.5, 3), (2.5, 4)])      # the first and the last do not
    assert not disagree([(1, 2)])                      # one repeat: nothing to disagree with
    assert not disagree([(1, 2), (math.nan, math.nan)])


def test_a_variant_whose_repeats_spread_more_than_the_others_gets_its_own_pool():
    # The baseline's two points: logs 0 and 0.02, 0.01 either side of their mean: squares
    # 0.0002 each, 1 degree each: pooled 0.0002 at 2 degrees. The draft's: logs 0 and 0.4:
    # 0.08 each: pooled 0.08 at 2 degrees. 0.08 / 0.0002 = 400, above F's 95 % point at (2, 2),
    # 19.0: the draft keeps its own (0.08, 2). The baseline is below the draft's, so it keeps
    # the run's pool: (0.0004 + 0.16) / 4 = 0.0411 at 4 degrees (never narrower than that).
    tight, wide = [100.0, 100 * E ** 0.02], [100.0, 100 * E ** 0.4]
    noise = by_variant({"baseline": [tight, tight], "draft": [wide, wide]})
    assert noise["draft"].dof == 2 and noise["draft"].variance == pytest.approx(0.08)
    assert noise["baseline"].dof == 4 and noise["baseline"].variance == pytest.approx(0.1604 / 4)
    # Above by chance only: logs 0 and 0.04 -> 0.0008, 4 x the baseline's, under 19.0: both
    # keep the run's pool, (0.0004 + 0.0016) / 4 = 0.0005 at 4 degrees.
    near = [100.0, 100 * E ** 0.04]
    same = by_variant({"baseline": [tight, tight], "draft": [near, near]})
    assert same["draft"] == same["baseline"] == RepeatNoise(pytest.approx(0.0005), 4)
    # One variant with repeats: nothing to compare with, the run's pool.
    assert by_variant({"draft": [wide], "baseline": [[100.0]]})["draft"] == RepeatNoise(
        pytest.approx(0.08), 1)
