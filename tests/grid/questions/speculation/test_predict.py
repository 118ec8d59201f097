"""Depth 0 (speculation configured, no drafts) against the baseline over the lattice
(grid/questions/speculation/predict.py `zero_speedups`, `zero_json`), other drafters as
points beside the surface (`surface_json`), and the depths not ruled out beside the best
(`prediction_json`), on hand-made costs."""

import numpy as np
import pytest

from grid.analysis.surface import Cost, DomainProfile, ForcedPoint, Profile, Throughput, predict
from grid.questions.speculation.predict import (
    prediction_json,
    surface_json,
    with_spread,
    zero_json,
    zero_speedups,
)
from grid.questions.speculation.read import Read
from grid.questions.speculation.steps import OWN


def cost(b, k, value):
    return Cost(b, k, value, np.full(5, value))


def test_depth_zero_is_one_over_its_cost_interpolated_in_log_load():
    costs = {(1, 0): cost(1, 0, 1.25), (4, 0): cost(4, 0, 1.6), (1, 2): cost(1, 2, 1.5)}
    found = zero_speedups(costs, (1, 2, 4, 8))
    # c=1: 1 / 1.25 = 0.8; c=2 the log-middle: c = (1.25 + 1.6) / 2 = 1.425 -> 0.7018;
    # c=4: 1 / 1.6 = 0.625; c=8 beyond the loads measured: nothing extrapolated
    assert set(found) == {1, 2, 4}
    assert found[1] == pytest.approx((0.8, 0.8, 0.8))
    assert found[2][0] == pytest.approx(1 / 1.425)
    assert found[4][0] == pytest.approx(0.625)
    rows = {r["load"]: r for r in zero_json(costs, (1, 2, 4, 8), 0.0)}
    assert rows[2]["cost"] == pytest.approx(1.425) and not rows[2]["measured"]
    assert rows[1]["measured"] and rows[1]["verdict"] == "slower"
    # no spread between repeats stated: its sign does not count
    within = {r["load"]: r for r in zero_json(costs, (1, 2, 4, 8), None)}
    assert within[1]["verdict"] == "undetermined (within-run noise only)"


def test_other_drafters_are_points_beside_the_surface_and_the_length_check_compares_them():
    base = {1: Throughput(100.0, np.full(5, 100.0))}

    def point(length, tok):
        return ForcedPoint(1, 4, length, Throughput(tok, np.full(5, tok)))
    # own: 2.8 x 100 / 80 = 3.5; noise-0.00 (index -2): 5.0 x 100 / 100 = 5.0; noise-0.60
    # (index -3): 1.2 x 100 / 30 = 4.0
    read = Read(forced={OWN: [point(2.8, 80.0)], -2: [point(5.0, 100.0)],
                        -3: [point(1.2, 30.0)]}, rate=OWN, baselines=base)
    out = surface_json(read, read.costs, "own", {}, (1,), (4,), None,
                       {-2: "noise-0.00", -3: "noise-0.60"})
    assert [r["cost"] for r in out["table"]] == [3.5]  # the surface: the own cell alone
    assert out["points"] == [
        {"load": 1, "depth": 4, "cost": 5.0, "interval": [5.0, 5.0], "source": "drafter",
         "drafter": "noise-0.00", "length": 5.0},
        {"load": 1, "depth": 4, "cost": 4.0, "interval": [4.0, 4.0], "source": "drafter",
         "drafter": "noise-0.60", "length": 1.2}]
    # the length check: the longest length's cost minus the shortest's, 5.0 - 4.0 = 1.0, its
    # interval (no spread) [1, 1] without 0: the cost depends on the length
    assert out["length_checks"] == [{"load": 1, "depth": 4, "lengths": [1.2, 5.0],
                                     "difference": 1.0, "interval": [1.0, 1.0],
                                     "agrees": False}]


def test_the_prediction_carries_the_depths_not_ruled_out_beside_the_best():
    def spread(b, k, value, lo, hi):  # 41 replicates: the 95 % interval exactly [lo, hi]
        return Cost(b, k, value, np.array([lo, lo, *[value] * 37, hi, hi]))
    # AL(1) = 1.8, AL(2) = 2.2. c=1: k=1 1.8 / 1.5 = 1.2 [1.125, 1.286], k=2 2.2 / 1.76 = 1.25
    # [1.158, 1.375]: depth 2, and 1 reaches its low end; c=2: k=1 1.059 [0.947, 1.2] spans 1,
    # k=2 0.917 [0.88, 0.957]: the baseline, and depth 1 reaches its 1
    costs = {(1, 1): spread(1, 1, 1.5, 1.4, 1.6), (1, 2): spread(1, 2, 1.76, 1.6, 1.9),
             (2, 1): spread(2, 1, 1.7, 1.5, 1.9), (2, 2): spread(2, 2, 2.4, 2.3, 2.5)}
    profile = Profile({"chat": DomainProfile("chat", (0.8, 0.5), (0.8, 0.4))}, "hand")
    dom = prediction_json(costs, profile, {}, 1, "eagle3", "chat", None)["domains"]["chat"]
    assert dom["best"] == {"1": 2, "2": 0}
    assert dom["plausible_depths"] == {"1": [1, 2], "2": [0, 1]}


def test_each_cell_carries_the_fits_own_interval_beside_the_widened_one():
    # AL(1) = 1.8 (a profile of one position: no spread over units); the fit c(1, 1) = 1.5 at
    # every replicate: 1.2 [1.2, 1.2]; widened to replicates 1.35 and 1.65: 1.8 / 1.65 =
    # 1.0909 .. 1.8 / 1.35 = 1.3333, whose 2.5 / 97.5 % points over the five replicates
    # (linear between order statistics, at positions 0.1 and 3.9) are 1.0909 + 0.1 x 0.1091 =
    # 1.1018 and 1.2 + 0.9 x 0.1333 = 1.32
    fit = {(1, 1): cost(1, 1, 1.5)}
    wide = {(1, 1): Cost(1, 1, 1.5, np.array([1.35, 1.5, 1.5, 1.5, 1.65]))}
    profile = Profile({"chat": DomainProfile("chat", (0.8,), (0.8,))}, "hand")
    (cell,) = prediction_json(wide, profile, {}, 1, "eagle3", "chat", None,
                              fit=fit)["domains"]["chat"]["cells"]
    assert cell["speedup"] == pytest.approx(1.2)
    assert cell["fit_interval"] == pytest.approx([1.2, 1.2])
    assert cell["interval"] == pytest.approx([1.1018, 1.32], abs=1e-4)
    # no fit given (nothing widened): no second interval
    (plain,) = prediction_json(fit, profile, {}, 1, "eagle3", "chat", None)["domains"]["chat"][
        "cells"]
    assert "fit_interval" not in plain


def test_a_stated_spread_between_repeats_widens_the_best_depths_choice():
    # AL(1) = 1.8 over c(1, 1) = 1.6667 at every replicate: 1.08x [1.08, 1.08], chosen over the
    # baseline on the within-run interval. 5 % between repeats: each replicate moved by a
    # normal draw of sd 0.05 x sqrt(2) x 1.08 = 0.0764, so the 95 % interval is about
    # 1.08 +- 1.96 x 0.0764 = [0.93, 1.23]: it holds 1, the baseline, with depth 1 not ruled out
    costs = {(1, 1): Cost(1, 1, 1.8 / 1.08, np.full(2000, 1.8 / 1.08))}
    profile = Profile({"chat": DomainProfile("chat", (0.8,), (0.8,))}, "hand")
    within = prediction_json(costs, profile, {}, 1, "eagle3", "chat", None)["domains"]["chat"]
    assert within["best"] == {"1": 1} and within["single"]["depth"] == 1
    spread = prediction_json(costs, profile, {}, 1, "eagle3", "chat", 0.05)["domains"]["chat"]
    assert spread["best"] == {"1": 0} and spread["plausible_depths"] == {"1": [0, 1]}
    assert spread["single"] is None
    # the cells keep the fit's interval (what a confirming cell is compared with)
    assert spread["cells"][0]["interval"] == pytest.approx([1.08, 1.08])
    # ... beside the interval the choice was made on (what a re-choice reads), holding 1
    lo_d, hi_d = spread["cells"][0]["decided_on"]
    assert lo_d < 1.0 < hi_d and "decided_on" not in within["cells"][0]
    lo, hi = with_spread(predict(costs, profile.domains["chat"]), 0.05)[(1, 1)].interval
    assert lo == pytest.approx(0.93, abs=0.01) and hi == pytest.approx(1.23, abs=0.01)
