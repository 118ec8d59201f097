"""The configured depth's crossover and threshold from the predicted speedups, through the
dense grid's own functions, and the drafter placed on each break-even length
(grid/questions/speculation/answers.py)."""

import numpy as np
import pytest

from grid.analysis.surface import Prediction
from grid.questions.speculation.answers import crossover_threshold, placed


def pred(b, k, speedup, spread=0.0):
    reps = np.array([speedup - spread, speedup, speedup + spread])
    return Prediction(b, k, 2.0, 2.0 / speedup, speedup, reps)


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
