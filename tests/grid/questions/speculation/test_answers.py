"""The configured depth's crossover and threshold from the predicted speedups, through the
dense grid's own functions, and the drafter placed on each break-even length
(grid/questions/speculation/answers.py); the best single depth."""

import numpy as np
import pytest

from grid.analysis.surface import Prediction
from grid.questions.speculation.answers import crossover_threshold, placed, single_depth


def pred(b, k, speedup, spread=0.0):
    reps = np.array([speedup - spread, speedup, speedup + spread])
    return Prediction(b, k, 2.0, 2.0 / speedup, speedup, reps)


def est(preds):
    """The (value, 95 % low, high) single_depth reads, from hand-made predictions."""
    return {key: (p.speedup, *p.interval) for key, p in preds.items()}


def test_the_configured_depths_crossover_and_threshold():
    preds = {(b, 3): pred(b, 3, s) for b, s in ((1, 1.5), (2, 1.3), (4, 1.1), (8, 0.9))}
    preds[(1, 1)] = pred(1, 1, 0.5)  # another depth: not the configured one's curve
    found = crossover_threshold(preds, 3, "eagle3", "coding", None)
    assert found is not None
    # speedup - 1: 0.5 0.3 0.1 -0.1; between 4 and 8 in log2: 2 ** (2 + 0.1 / 0.2) = 5.66
    assert found["crossover"] == pytest.approx(5.66) and found["interval"] == [5.66, 5.66]
    assert found["speculative_disable_above_batch"] == 4  # the largest load below it
    assert crossover_threshold(preds, 5, "eagle3", "coding", None) is None  # no load at depth 5


def test_a_stated_spread_between_repeats_widens_the_curve_before_its_verdicts():
    preds = {(b, 3): pred(b, 3, s) for b, s in ((1, 1.5), (2, 1.3), (4, 1.1), (8, 0.9))}
    # 5 % between repeats: each ratio of two once-measured cells +- 1.96 x 0.05 x sqrt(2) =
    # 13.86 % of its value (the within-run intervals are points here): c=2 1.3 - 0.180 = 1.120
    # (faster), c=4 1.1 - 0.152 = 0.948 .. 1.252 (holds 1): the threshold falls from 4 to 2
    found = crossover_threshold(preds, 3, "eagle3", "coding", 0.05)
    assert found is not None and found["speculative_disable_above_batch"] == 2
    assert found["verdict"] == "threshold" and found["plausible_range"] == [2, None]
    assert found["crossover"] == pytest.approx(5.66)  # the point crossover does not move


def test_an_unsure_lowest_load_leaves_the_threshold_undetermined():
    # c=1: 1.05 [0.95, 1.15] holds 1 (undetermined), c=2: 0.8 [0.75, 0.85] slower
    preds = {(1, 3): pred(1, 3, 1.05, 0.1), (2, 3): pred(2, 3, 0.8, 0.05)}
    found = crossover_threshold(preds, 3, "eagle3", "coding", None)
    assert found is not None and found["verdict"] == "undetermined"
    assert found["speculative_disable_above_batch"] is None
    assert found["statement"].startswith("undetermined: speculation is not significantly "
                                         "faster at the lowest tested concurrency (c=1 +5 %")


def test_the_drafter_is_placed_by_its_interval():
    assert placed(pred(1, 3, 1.2, 0.1)) == "pays"
    assert placed(pred(1, 3, 0.8, 0.1)) == "loses"
    assert placed(pred(1, 3, 1.05, 0.1)) == "unsure"


def test_the_best_single_depth_pays_longest_in_log_load():
    # depth 1 pays at c = 1, 2, 4, 8: 1.3, 1.2, 1.1, 1.05 -> the geometric mean over the 4
    # loads (1.3 x 1.2 x 1.1 x 1.05) ** (1/4) = 1.8018 ** 0.25 = 1.1586x; depth 3: 1.8, 1.4,
    # then 1.05 [0.95, 1.15] holds 1: it stops at c=2, switched off above (1 there, even at
    # c=8 where it pays nothing) -> (1.8 x 1.4) ** (1/4) = 2.52 ** 0.25 = 1.2599x: depth 3,
    # paying up to c = 2, deciding between 2 and 4
    preds = {(b, 1): pred(b, 1, s) for b, s in ((1, 1.3), (2, 1.2), (4, 1.1), (8, 1.05))}
    preds.update({(1, 3): pred(1, 3, 1.8), (2, 3): pred(2, 3, 1.4),
                  (4, 3): pred(4, 3, 1.05, 0.1), (8, 3): pred(8, 3, 0.9)})
    assert single_depth(est(preds)) == {"depth": 3, "last": 2, "next": 4, "mean_speedup": 1.2599}
    # depth 3 at c=2 down to 1.1: 1.98 ** 0.25 = 1.1862x, still first
    preds[(2, 3)] = pred(2, 3, 1.1)
    assert single_depth(est(preds))["depth"] == 3
    # ... and at 1.0 it stops at c = 1: 1.8 ** 0.25 = 1.1583x < 1.1586x: depth 1,
    # paying at every load (nothing above it)
    preds[(2, 3)] = pred(2, 3, 1.0)
    assert single_depth(est(preds)) == {"depth": 1, "last": 8, "next": None,
                                        "mean_speedup": 1.1586}
    # above its threshold the server runs depth 0 (speculation configured, no drafts): with
    # depth 0 measured at 0.8x of the baseline at c = 4 and 8, depth 3 at 1.1 at c=2 (1.8,
    # 1.1, then 0.8, 0.8) runs (1.98 x 0.64) ** 0.25 = 1.0610x, below depth 1 everywhere
    # (1.1586x, it never switches off): depth 1, where taking depth 0 as the baseline chose 3
    preds[(2, 3)] = pred(2, 3, 1.1)
    one = {"depth": 1, "last": 8, "next": None, "mean_speedup": 1.1586}
    assert single_depth(est(preds), {4: 0.8, 8: 0.8}) == one
    assert single_depth(est(preds), {4: 0.8, 8: 0.8, 16: float("nan")}) == one
    # depth 0 at 0.8x at c = 1 and 2 only, where both depths draft: no change, depth 3 1.1862x
    assert single_depth(est(preds), {1: 0.8, 2: 0.8})["mean_speedup"] == 1.1862
    # nothing pays at the lowest load: no single depth
    assert single_depth(est({(1, 2): pred(1, 2, 0.9), (2, 2): pred(2, 2, 1.2)})) is None
