"""Capacity under the SLOs on hand-worked cells: every expected value below is worked out by
hand in the comments, from the cells' numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grid.analysis.capacity import capacities, capacity_of, serves_most
from grid.analysis.decision import NO_DIFFERENCE
from tests.grid.analysis.test_pareto import STEPS, stats_of


def test_capacity_rule_by_hand():
    loads = np.array([1.0, 2.0, 4.0, 8.0])
    # met at 1 and 2, missed at 4: capacity 2 (8 meets again, but above the first miss)
    assert capacity_of(loads, np.array([1.0, 0.95, 0.85, 0.95])) == 2.0
    # exactly the target counts as met
    assert capacity_of(loads, np.array([0.9, 0.9, 0.5, 0.5])) == 2.0
    assert capacity_of(loads, np.array([0.5, 1.0, 1.0, 1.0])) == -math.inf  # not even at 1
    assert capacity_of(loads, np.array([np.nan, 1.0, 1.0, 1.0])) == -math.inf  # NaN misses
    assert capacity_of(loads, np.ones(4)) == 8.0  # every load: the highest tested
    assert capacity_of(loads, np.array([1.0, 0.97, 0.97, 0.5]), target=0.99) == 1.0


HALF = np.array([0.85] * 500 + [0.95] * 500)
"""Attainment replicates of a load that meets the 0.9 target in half of them."""
CELLS = [
    {"cell_id": "b1", "variant": "baseline", "c": 1, "tok": 100.0, "attain": 1.0},
    # c=4 meets the target (0.95) but only in half of the replicates: capacity 4, and over
    # the replicates half 1, half 4: percentiles (inverted-CDF) 2.5 % -> 1, 97.5 % -> 4.
    {"cell_id": "b4", "variant": "baseline", "c": 4, "tok": 320.0, "good": 300.0,
     "attain": 0.95, "reps": {"slo_attainment": HALF}},
    {"cell_id": "b16", "variant": "baseline", "c": 16, "tok": 800.0, "good": 100.0,
     "attain": 0.5},
    {"cell_id": "e1", "variant": "eagle3", "c": 1, "tok": 150.0, "attain": 1.0},
    {"cell_id": "e4", "variant": "eagle3", "c": 4, "tok": 420.0, "attain": 1.0},
    # eagle3 meets the SLOs at every tested load: capacity 16 and not bracketed
    {"cell_id": "e16", "variant": "eagle3", "c": 16, "tok": 520.0, "good": 500.0,
     "attain": 0.92},
    {"cell_id": "s1", "variant": "slow", "c": 1, "tok": 20.0, "good": 5.0, "attain": 0.25},
]
for _cell in CELLS:  # attainment replicates: constant unless given (STEPS would pass 1)
    _cell.setdefault("reps", {}).setdefault("slo_attainment", np.full(1000, _cell["attain"]))
GPUS = {c["cell_id"]: 8 for c in CELLS}


def test_capacity_interval_goodput_cost_and_energy_by_hand():
    caps = {c.variant: c for c in capacities(stats_of(CELLS), GPUS, usd_per_gpu_hour=3.0,
                                             j_per_token={"e16": 0.4})}
    base, eagle, slow = caps["baseline"], caps["eagle3"], caps["slow"]
    assert (base.capacity, base.lo, base.hi, base.bracketed) == (4.0, 1.0, 4.0, True)
    assert base.attainment == 0.95
    # goodput at c=4: 300 with replicates 300 + k: [281, 319]; per GPU 300 / 8 = 37.5
    assert (base.goodput_tok_s, base.goodput_tok_s_lo, base.goodput_tok_s_hi) == \
        pytest.approx((300, 281, 319))
    assert base.goodput_per_gpu == pytest.approx(37.5)
    assert (eagle.capacity, eagle.lo, eagle.hi, eagle.bracketed) == (16.0, 16.0, 16.0, False)
    # 8 GPUs x $3 = $24 per hour; at c=16 eagle3 makes 520 tok/s, 500 of them within the
    # SLOs: 24 / 3600 / 520 x 1e6 = 12.8205 $/M output tokens, 24 / 3600 / 500 x 1e6 = 13.3333
    # per million tokens within the SLOs.
    assert eagle.usd_per_mtok == pytest.approx(12.8205, abs=1e-4)
    assert eagle.usd_per_good_mtok == pytest.approx(13.3333, abs=1e-4)
    assert eagle.j_per_token == pytest.approx(0.4)
    assert math.isnan(base.j_per_token)  # no power read there
    # slow misses the SLOs at its lowest load: no capacity, no figures
    assert not slow.served and slow.capacity == -math.inf and slow.attainment == 0.25
    assert math.isnan(slow.goodput_tok_s) and math.isnan(slow.usd_per_mtok)
    assert "does not hold the SLOs even at c=1" in slow.describe()
    assert "capacity at least c=16, the highest tested, with 90% of requests" in eagle.describe()
    assert "95% interval c=1 .. c=4" in base.describe()


def test_the_variant_that_serves_most_at_the_slo_by_hand():
    caps = capacities(stats_of(CELLS), GPUS)
    (best,) = serves_most(caps)
    # per GPU at capacity: eagle3 500 / 8 = 62.5, baseline 300 / 8 = 37.5; margin
    # 62.5 / 37.5 - 1 = +66.7 %; replicates (500 + k) / (300 + k) - 1 fall with k, so the
    # interval runs from k = 19 to k = -19: 519 / 319 - 1 = 0.6270 .. 481 / 281 - 1 = 0.7117.
    assert (best["winner"], best["runner_up"], best["metric"]) == (
        "eagle3", "baseline", "goodput_tok_s_per_gpu")
    assert (best["value"], best["runner_up_value"]) == pytest.approx((62.5, 37.5))
    assert best["margin"] == pytest.approx(2 / 3)
    assert (best["lo"], best["hi"]) == pytest.approx((0.6270, 0.7117), abs=1e-4)
    assert best["verdict"] == "winner"
    # slow serves nothing at the SLO: never a candidate


def test_serves_most_per_server_when_gpus_unknown_and_no_difference():
    cells = [{"cell_id": "a1", "variant": "a", "c": 1, "tok": 100.0, "good": 100.0},
             {"cell_id": "b1", "variant": "b", "c": 1, "tok": 101.0, "good": 101.0,
              # replicates far wider than the gap: 101 + 10 k
              "reps": {"goodput_tok_s": 101.0 + 10 * STEPS}}]
    for c in cells:
        c.setdefault("reps", {})["slo_attainment"] = np.ones(41)
    (best,) = serves_most(capacities(stats_of(cells), {"a1": None, "b1": 1}))
    # a's GPUs are unknown: compared per server, b 101 vs a 100 good tok/s
    assert best["metric"] == "goodput_tok_s" and best["winner"] == "b"
    assert best["margin"] == pytest.approx(0.01)
    assert best["verdict"] == NO_DIFFERENCE


def test_no_capacity_is_claimed_at_or_beyond_an_over_saturated_load():
    # eagle3 holds the SLOs at every load (as in CELLS), but its c=4 cell was stopped
    # over-saturated: a miss whatever its attainment, so capacity c=1 (not 16), and every
    # replicate agrees: interval c=1 .. c=1.
    cells = [dict(c, reps=dict(c["reps"])) for c in CELLS if c["variant"] == "eagle3"]
    cells[1]["stop"] = "over_saturated"
    (eagle,) = capacities(stats_of(cells), GPUS)
    assert (eagle.capacity, eagle.lo, eagle.hi, eagle.bracketed) == (1.0, 1.0, 1.0, True)
    # the same cells without the stop: capacity 16, as above
    cells[1]["stop"] = "target"
    (eagle,) = capacities(stats_of(cells), GPUS)
    assert eagle.capacity == 16.0
