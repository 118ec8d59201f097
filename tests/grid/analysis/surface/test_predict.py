"""A drafter on the surface: speedup and its interval, break-even, best depth and the depths not
ruled out beside it, schedule."""

import numpy as np
import pytest

from grid.analysis.surface import Cost, DomainProfile, depth_plan, plausible_depths, predict

PROFILE = DomainProfile("chat", (0.8, 0.5), (0.8, 0.4))
"""AL(1) = 1.8, AL(2) = 2.2."""


def hand_surface(values):
    return {(b, k): Cost(b, k, c, np.full(2, c)) for (b, k), c in values.items()}


COSTS = hand_surface({(1, 1): 1.3, (1, 2): 1.45, (64, 1): 1.5, (64, 2): 2.0, (64, 3): 2.7,
                      (256, 1): 2.0, (256, 2): 3.0})


def test_speedup_is_accept_length_over_cost():
    pred = predict(COSTS, PROFILE)
    assert pred[(1, 2)].speedup == pytest.approx(2.2 / 1.45)
    assert pred[(64, 1)].speedup == pytest.approx(1.2)
    assert pred[(256, 1)].speedup == pytest.approx(0.9)
    assert pred[(64, 2)].break_even == 2.0  # the cost: AL needed to break even
    assert (64, 3) not in pred  # beyond the profile's two positions


def test_interval_propagates_both_replicates():
    profile = DomainProfile("chat", (0.8, 0.5), (0.8, 0.4),
                            replicates=np.array([[0.8, 0.4], [0.6, 0.3], [0.7, 0.2]]))
    costs = {(1, 2): Cost(1, 2, 1.45, np.array([1.45, 1.2]))}
    (p,) = predict(costs, profile).values()
    # AL(2) replicates 2.2, 1.9 (the first two of the profile's) over the cost's 1.45, 1.2
    np.testing.assert_allclose(p.reps, [2.2 / 1.45, 1.9 / 1.2])
    lo, hi = p.interval
    assert 2.2 / 1.45 <= lo < hi <= 1.9 / 1.2


def test_best_depth_and_schedule():
    plan = depth_plan(predict(COSTS, PROFILE), setting=lambda tiers: {"tiers": tiers})
    # c=1: 1.38 (k=1) < 1.52 (k=2); c=64: 1.2 > 1.1; c=256: 0.9 and 0.73 below the baseline's 1
    assert plan["best"] == {"1": 2, "64": 1, "256": 0}
    assert plan["schedule"] == [[1, 2], [64, 1], [256, 0]]
    assert plan["speculative_depth"] == plan["schedule"]
    assert plan["text"] == "depth 2 from batch 1, depth 1 from batch 64, baseline from batch 256"
    assert plan["engine"] == {"tiers": ((1, 2), (64, 1), (256, 0))}


def test_a_tie_with_the_baseline_keeps_the_baseline_and_a_schedule_that_never_drafts():
    costs = hand_surface({(1, 1): 1.8, (8, 1): 2.0})
    plan = depth_plan(predict(costs, PROFILE), setting=lambda tiers: {"called": True})
    assert plan["best"] == {"1": 0, "8": 0}  # speedup exactly 1 at c=1: the smaller depth
    assert (plan["schedule"], plan["speculative_depth"], plan["engine"]) == ([[1, 0]], None,
                                                                            None)


def test_a_depth_whose_interval_spans_the_baseline_is_not_chosen_over_it():
    # c=1, k=1: AL 1.8 over the cost 1.75 [1.5, 2.0] (replicates 1.5, 1.75, 2.0): speedup
    # 1.029 [0.9, 1.2]: above 1 by its point, but its interval spans 1 -> the baseline
    costs = {(1, 1): Cost(1, 1, 1.75, np.array([1.5, 1.75, 2.0]))}
    assert depth_plan(predict(costs, PROFILE))["best"] == {"1": 0}
    # the same point with its whole interval above 1 (cost 1.75 [1.7, 1.78]) -> depth 1
    costs = {(1, 1): Cost(1, 1, 1.75, np.array([1.7, 1.75, 1.78]))}
    assert depth_plan(predict(costs, PROFILE))["best"] == {"1": 1}


THREE = DomainProfile("chat", (0.8, 0.5, 0.5), (0.8, 0.4, 0.2))
"""AL(1) = 1.8, AL(2) = 2.2, AL(3) = 2.4."""


def spread_cost(b, k, value, lo, hi):
    """A cost whose 95 % interval is exactly [lo, hi]: 41 replicates, the 2.5th and 97.5th
    percentiles at the 2nd and 40th sorted (so the speedup's is [AL / hi, AL / lo])."""
    return Cost(b, k, value, np.array([lo, lo, *[value] * 37, hi, hi]))


def test_the_depths_not_ruled_out_beside_the_best():
    costs = {key: spread_cost(*key, *c) for key, c in {
        # c=1, a three-way near-tie: k=1 1.8 / 1.5 = 1.2 [1.8/1.6, 1.8/1.4] = [1.125, 1.286];
        # k=2 2.2 / 1.76 = 1.25 [1.158, 1.375]; k=3 2.4 / 2.0 = 1.2 [1.091, 1.333]. All above
        # 1, k=2 the highest point: the best; every high end reaches its low end 1.158, the
        # baseline's 1 does not -> 1, 2, 3
        (1, 1): (1.5, 1.4, 1.6), (1, 2): (1.76, 1.6, 1.9), (1, 3): (2.0, 1.8, 2.2),
        # c=8, a clear winner: k=1 1.5 [1.475, 1.525]; k=2 1.1 [1.048, 1.158]; k=3 1.0
        # [0.96, 1.043]: no other high end reaches 1.475 -> 1 alone
        (8, 1): (1.2, 1.18, 1.22), (8, 2): (2.0, 1.9, 2.1), (8, 3): (2.4, 2.3, 2.5),
        # c=64, the baseline best: k=1 1.059 [0.947, 1.2] spans 1 (not chosen over it); k=2
        # 0.917 [0.88, 1.0] reaches the baseline's 1 exactly (at or above: in); k=3 0.923
        # [0.889, 0.96] below it -> 0, 1, 2
        (64, 1): (1.7, 1.5, 1.9), (64, 2): (2.4, 2.2, 2.5), (64, 3): (2.6, 2.5, 2.7)}.items()}
    preds = predict(costs, THREE)
    assert preds[(1, 2)].interval == pytest.approx((2.2 / 1.9, 2.2 / 1.6))
    assert plausible_depths(preds) == {1: (1, 2, 3), 8: (1,), 64: (0, 1, 2)}
    plan = depth_plan(preds)
    assert plan["best"] == {"1": 2, "8": 1, "64": 0}  # the point choice stays
    assert plan["plausible_depths"] == {"1": [1, 2, 3], "8": [1], "64": [0, 1, 2]}
    assert plan["text"] == "depth 2 from batch 1, depth 1 from batch 8, baseline from batch 64"
