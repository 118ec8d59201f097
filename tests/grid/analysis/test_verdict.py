"""Three verdicts and the cost of settling an undetermined one (grid/analysis/verdict.py), the
threshold recommended from the verdicts alone (`recommend_threshold`) and Holm's step-down, on
hand-made tables and replicates whose answers are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grid.analysis.decision import Crossover
from grid.analysis.verdict import (
    WITHIN_ONLY,
    between_runs,
    cost_text,
    half_width,
    holm,
    judged,
    p_value,
    recommend_threshold,
    repeats_to_resolve,
    verdict_of,
)


def test_three_verdicts_from_the_interval():
    assert verdict_of(0.01, 0.2) == "faster"
    assert verdict_of(-0.2, -0.01) == "slower"
    assert verdict_of(-0.05, 0.11) == "undetermined"
    assert verdict_of(math.nan, 0.2) == "undetermined"


def test_repeats_to_resolve_follow_one_over_sqrt_repeats():
    # half-width 8 % at 1 repeat, effect 3 %: 1 x (8 / 3)^2 = 7.1 -> 8 repeats
    assert repeats_to_resolve(0.08, 0.03, 1) == 8
    # the same at 3 repeats: 3 x 7.11 = 21.3 -> 22
    assert repeats_to_resolve(0.08, -0.03, 3) == 22
    # a half-width already below the effect: one more repeat at least
    assert repeats_to_resolve(0.02, 0.05, 1) == 2
    # no effect, or one that would take over 100 repeats (1 x (8 / 0.5)^2 = 256): not said
    assert repeats_to_resolve(0.08, 0.0, 1) is None
    assert repeats_to_resolve(0.08, 0.005, 1) is None
    assert half_width(-0.05, 0.11) == 0.08


def test_cost_text_names_the_detectable_effect_and_the_repeats():
    assert cost_text(0.03, -0.05, 0.11, 1) == (
        "the run could not detect an effect smaller than ±8 %; about 8 repeats would resolve "
        "+3 % (an interval's half-width shrinks about as 1/sqrt(repeats))")


def _table(rows: list[tuple[int, float, float, float, str]], repeats: int = 1) -> pd.DataFrame:
    """(concurrency, speedup, lo, hi, verdict) rows of one variant on one workload."""
    return pd.DataFrame([{"variant": "eagle3", "workload": "coding", "load_kind": "concurrency",
                          "load": float(c), "speedup": s, "lo": lo, "hi": hi, "verdict": v,
                          "repeats": repeats} for c, s, lo, hi, v in rows])


def _recommend(table: pd.DataFrame) -> dict:
    loads = table.load.tolist()
    # the crossover's figures play no part in the recommendation: any will do
    return recommend_threshold(table, Crossover("eagle3", "coding", "concurrency", loads,
                                                math.nan, math.nan, math.nan))


def test_an_undetermined_first_load_and_a_faster_second_is_undetermined_not_off():
    # c=1 -1 % [-6 %, +4 %] undetermined; c=2 +12 % faster; c=4 -10 % slower. The first-
    # crossing rule said 0 (keep it off); the verdicts say: no significantly-faster run from
    # the lowest load, so undetermined, bounded above by c=2 (slower from c=4). The cost at
    # c=1: half-width 5 %, effect 1 %: 1 x (5 / 1)^2 = 25 repeats.
    rec = _recommend(_table([(1, -0.01, -0.06, 0.04, "undetermined"),
                             (2, 0.12, 0.05, 0.19, "faster"),
                             (4, -0.10, -0.15, -0.05, "slower")]))
    assert rec["verdict"] == "undetermined"
    assert rec["speculative_disable_above_batch"] is None
    assert rec["undetermined"] == [0, 2] and rec["plausible_range"] == [0, 2]
    assert rec["settle"] == {"load": 1, "repeats": 25}
    assert "could not detect an effect smaller than ±5 %" in rec["statement"]
    assert "about 25 repeats would resolve -1 %" in rec["statement"]
    assert "faster at c=2" in rec["statement"] and "slower at c=4" in rec["statement"]
    assert "keep it off" not in rec["statement"]


def test_all_undetermined_is_undetermined_with_its_cost_and_no_upper_end():
    rec = _recommend(_table([(1, 0.03, -0.05, 0.11, "undetermined"),
                             (8, -0.02, -0.09, 0.05, "undetermined")]))
    assert rec["verdict"] == "undetermined"
    assert rec["speculative_disable_above_batch"] is None
    assert rec["undetermined"] == [0, None]
    assert rec["settle"] == {"load": 1, "repeats": 8}  # 1 x (8 / 3)^2 = 7.1
    assert "between 0 and 8 or above" in rec["statement"]


def test_all_significantly_slower_keeps_it_off():
    rec = _recommend(_table([(1, -0.20, -0.25, -0.15, "slower"),
                             (8, -0.40, -0.45, -0.35, "slower")]))
    assert rec["verdict"] == "off"
    assert rec["speculative_disable_above_batch"] == 0
    assert "keep it off" in rec["statement"]


def test_the_threshold_ends_the_faster_run_and_its_range_reaches_the_first_slower():
    # faster at 1 and 2, undetermined at 4, slower at 8: set 2, plausible 2 to 4; the cost at
    # c=4: half-width 6 %, effect 2 %, 3 repeats: 3 x 9 = 27
    rec = _recommend(_table([(1, 0.30, 0.25, 0.35, "faster"), (2, 0.20, 0.15, 0.25, "faster"),
                             (4, 0.02, -0.04, 0.08, "undetermined"),
                             (8, -0.20, -0.25, -0.15, "slower")], repeats=3))
    assert rec["verdict"] == "threshold"
    assert rec["speculative_disable_above_batch"] == 2
    assert rec["plausible_range"] == [2, 4]
    assert "about 27 repeats would resolve +2 %" in rec["statement"]
    assert "plausible range 2 to 4" in rec["statement"]


def test_pays_everywhere_only_when_every_load_is_faster():
    everywhere = _recommend(_table([(1, 0.3, 0.2, 0.4, "faster"), (8, 0.1, 0.05, 0.15,
                                                                    "faster")]))
    assert everywhere["verdict"] == "always"
    assert everywhere["speculative_disable_above_batch"] is None
    # a positive but undetermined top load is not "pays at every tested concurrency"
    top_open = _recommend(_table([(1, 0.3, 0.2, 0.4, "faster"), (8, 0.1, -0.05, 0.25,
                                                                  "undetermined")]))
    assert top_open["verdict"] == "threshold"
    assert top_open["speculative_disable_above_batch"] == 1
    assert top_open["plausible_range"] == [1, None]


def test_holm_step_down_by_hand():
    # m = 4: sorted 0.005 <= 0.05 / 4 = 0.0125 kept; 0.01 <= 0.05 / 3 = 0.0167 kept; 0.03 >
    # 0.05 / 2 = 0.025: stops there, so 0.04 goes too (though 0.04 <= 0.05 alone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert holm([]) == []


def test_bootstrap_p_value_by_hand():
    # 9 replicates, 1 at or below zero: 2 x (1 + 1) / (9 + 1) = 0.4; none: 2 x 1 / 10 = 0.2;
    # a NaN is left out
    assert p_value(np.array([-1.0, 1, 2, 3, 4, 5, 6, 7, 8])) == pytest.approx(0.4)
    assert p_value(np.array([1.0, 1, 2, 3, 4, 5, 6, 7, 8, np.nan])) == pytest.approx(0.2)
    assert p_value(np.array([np.nan])) == 1.0


def test_a_stated_spread_between_repeats_widens_a_ratio_in_quadrature():
    # 1.10 [1.07, 1.14] from one repeat each; 3 % between repeats: the ratio's own spread is
    # 0.03 x sqrt(2) = 4.243 %, 95 %: 1.96 x 4.243 % x 1.10 = 0.0915; each side in quadrature:
    # low 1.10 - sqrt(0.03^2 + 0.0915^2) = 1.10 - 0.0963 = 1.0037, high 1.10 + sqrt(0.04^2 +
    # 0.0915^2) = 1.10 + 0.0998 = 1.1998
    lo, hi = between_runs(1.10, 1.07, 1.14, 0.03)
    assert (lo, hi) == (pytest.approx(1.0037, abs=1e-4), pytest.approx(1.1998, abs=1e-4))
    assert judged(1.10, 1.07, 1.14, 0.03)[0] == "faster"
    # 4 %: 0.1220 beside 0.03: low 1.10 - 0.1256 = 0.974: holds 1
    assert judged(1.10, 1.07, 1.14, 0.04)[0] == "undetermined"
    # no spread stated: no sign counts, the within-run interval kept as measured
    assert judged(1.10, 1.07, 1.14, None) == (WITHIN_ONLY, 1.07, 1.14)
    assert judged(1.10, 1.07, 1.14, 0.0) == ("faster", 1.07, 1.14)
