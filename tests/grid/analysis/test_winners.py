"""Which threshold variant won, and how often over the bootstrap (grid/analysis/winners.py),
on hand-made points whose replicates are chosen so every share is counted by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grid.analysis.points import Point
from grid.analysis.winners import NO_DIFFERENCE, best_share, threshold_winners, win_share


def test_win_share_counts_the_replicates_where_the_winner_tops_every_other():
    # six replicates: A is the highest in #0 and #3 only; B in #1, #4; C in #2, #5
    reps = {"A": np.array([3.0, 1, 2, 3, 1, 2]), "B": np.array([2.0, 3, 1, 2, 3, 1]),
            "C": np.array([1.0, 2, 3, 1, 2, 3])}
    assert win_share(reps, "A") == pytest.approx(2 / 6)
    # a tie is no win; a replicate not finite for any option is left out: A tops B in #0 only
    # of the three finite ones (#1 ties, #2 loses)
    assert win_share({"A": np.array([2.0, 1, 1, 9]), "B": np.array([1.0, 1, 2, np.nan])},
                     "A") == pytest.approx(1 / 3)
    assert math.isnan(win_share({"A": np.array([np.nan]), "B": np.array([1.0])}, "A"))
    assert best_share(2 / 6) == " (the best in 33 % of bootstrap replicates)"
    assert best_share(None) == ""


def _point(variant: str, value: float, reps: list[float]) -> Point:
    return Point(variant, "coding", "concurrency", 8.0,
                 {"output_tok_s": value}, {"output_tok_s": np.array(reps)})


def test_a_three_way_near_tie_names_a_leader_that_wins_a_third_of_the_time():
    # three thresholds within 1.5 % of each other; each tops the others in two of six
    # replicates. The leader by point estimate (off_above-4, 101) beats the runner-up by
    # +1 % with an interval that holds zero, and is the best in a third of the replicates.
    a, b, c = ([101.0, 99, 100, 101, 99, 100], [100.0, 101, 99, 100, 101, 99],
               [99.0, 100, 101, 99, 100, 101])
    pts = [_point("eagle3__off_above-4", 101.0, a), _point("eagle3__off_above-8", 100.0, b),
           _point("eagle3__off_above-16", 99.5, c)]
    result = threshold_winners(pts, metrics=("output_tok_s",))
    (here,) = result["per_load"]
    assert (here["winner"], here["runner_up"]) == ("eagle3__off_above-4", "eagle3__off_above-8")
    assert here["margin"] == pytest.approx(0.01)
    assert here["verdict"] == NO_DIFFERENCE and not here["significant"]
    assert here["wins_share"] == pytest.approx(2 / 6)
    (overall,) = result["overall"]
    assert overall["winner"] == "eagle3__off_above-4"
    assert overall["wins_share"] == pytest.approx(2 / 6)
