"""Capacity under the SLOs on hand-worked cells: every expected value below is worked out by
hand in the comments, from the cells' numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grid.analysis.capacity import (
    Attainment,
    Boundary,
    boundary,
    capacities,
    cell_attainments,
    fewest_to_meet,
    pooled,
    serves_most,
)
from grid.analysis.cellstats import CellStats
from grid.analysis.decision import NO_DIFFERENCE
from tests.grid.analysis.test_pareto import STEPS, stats_of

# The exact (Clopper-Pearson) 95 % interval where it has a closed form: n of n requests within
# the SLOs: low end 0.025 ** (1 / n); 0 of n: high end 1 - 0.025 ** (1 / n).
MEETS = Attainment(40, 40)  # low end 0.025 ** (1 / 40) = 0.912 >= 0.9
MISSES = Attainment(0, 40)  # high end 0.088 < 0.9
FEW = Attainment(10, 10)  # low end 0.692: undecided, point estimate 100 %
ONE_MISSED = Attainment(0, 1)  # high end 0.975: undecided, point estimate 0 %


def test_attainment_interval_and_verdict_by_hand():
    # 36 of 36: 0.025 ** (1 / 36) = exp(ln 0.025 / 36) = exp(-3.68888 / 36) = 0.90261, meets;
    # 35 of 35: exp(-3.68888 / 35) = 0.89997, just short: undecided. So 36 is the fewest.
    assert Attainment(36, 36).interval[0] == pytest.approx(0.90261, abs=1e-5)
    assert Attainment(36, 36).verdict(0.9) == "meets"
    assert Attainment(35, 35).verdict(0.9) == "undecided" and fewest_to_meet(0.9) == 36
    # 0 of 2: 1 - 0.025 ** 0.5 = 1 - 0.15811 = 0.84189 < 0.9: misses; 0 of 1: 0.975: undecided
    assert Attainment(0, 2).interval == pytest.approx((0.0, 0.84189), abs=1e-5)
    assert Attainment(0, 2).verdict(0.9) == "misses"
    assert ONE_MISSED.verdict(0.9) == "undecided" and ONE_MISSED.interval[1] == 0.975
    assert Attainment(0, 0).interval == (0.0, 1.0) and math.isnan(Attainment(0, 0).value)
    assert Attainment(40, 40, over_saturated=True).verdict(0.9) == "misses"
    # a lower target: 10 of 10 meets 0.6 (0.692 >= 0.6)
    assert FEW.verdict(0.6) == "meets"
    # holds: not a miss and the point estimate reaches the target
    assert FEW.holds(0.9) and MEETS.holds(0.9) and not ONE_MISSED.holds(0.9)
    assert not Attainment(40, 40, over_saturated=True).holds(0.9)
    assert not Attainment(0, 0).holds(0.9)  # no request: NaN does not reach it


def test_the_rule_by_hand():
    # meets at 0 and 1, undecided at 2 (100 % of 10), misses at 3: the first miss is 3, the
    # interval's low end 1; up from 1 the point estimate holds at 2: capacity 2. Index 4 meets
    # again, but above the first miss: it does not count.
    assert boundary([MEETS, MEETS, FEW, MISSES, MEETS]) == Boundary(2, 1, 3)
    # an undecided miss (0 of 1) below a load that meets meets too (the rule reads the service
    # as holding up to some load): low end 1, capacity 1
    assert boundary([ONE_MISSED, MEETS, MISSES]) == Boundary(1, 1, 2)
    # nothing meets and the lowest point estimate is 0 %: no capacity, no low end
    assert boundary([ONE_MISSED, FEW, MISSES]) == Boundary(None, None, 2)
    # nothing misses: the point estimates hold to the top
    assert boundary([FEW, FEW]) == Boundary(1, None, None)
    assert boundary([MISSES, MEETS]) == Boundary(None, None, 0)
    # no request in a window: NaN, undecided, and the point run stops there
    assert boundary([MEETS, Attainment(0, 0), FEW]) == Boundary(0, 0, None)


def test_cell_attainments_from_the_analysed_table_and_pooled_repeats():
    table = pd.DataFrame({"cell_id": ["a", "b", "c"], "slo_attainment": [0.75, np.nan, 1.0],
                          "window_requests": [4, 0, 3],
                          "stop_reason": [None, None, "over_saturated"]})
    got = cell_attainments(table)
    # 0.75 of 4 = 3 good; no request: 0 of 0; the over-saturated cell keeps its flag
    assert got == {"a": Attainment(3, 4), "b": Attainment(0, 0),
                   "c": Attainment(3, 3, over_saturated=True)}
    assert pooled([got["a"], got["c"]]) == Attainment(6, 7, over_saturated=True)


def with_windows(cells: list[dict]) -> CellStats:
    """stats_of with each cell's steady-window requests (`n`, default 40)."""
    stats = stats_of(cells)
    stats.table["window_requests"] = [c.get("n", 40) for c in cells]
    return stats


CELLS = [
    {"cell_id": "b1", "variant": "baseline", "c": 1, "tok": 100.0, "attain": 1.0},
    # c=4 holds every request of 20 (0.025 ** (1 / 20) = 0.832: undecided), c=16 none of 40
    # (a miss): capacity 4 (the point estimate), interval c=1 .. c=4
    {"cell_id": "b4", "variant": "baseline", "c": 4, "tok": 320.0, "good": 300.0,
     "attain": 1.0, "n": 20},
    {"cell_id": "b16", "variant": "baseline", "c": 16, "tok": 800.0, "good": 100.0,
     "attain": 0.0},
    {"cell_id": "e1", "variant": "eagle3", "c": 1, "tok": 150.0, "attain": 1.0},
    {"cell_id": "e4", "variant": "eagle3", "c": 4, "tok": 420.0, "attain": 1.0},
    # eagle3 misses at no tested load; c=16 holds all of 10 requests (undecided): capacity 16
    # (the point estimate), interval c=4 .. c=16, not bracketed
    {"cell_id": "e16", "variant": "eagle3", "c": 16, "tok": 520.0, "good": 500.0,
     "attain": 1.0, "n": 10},
    # 0 of 4: 1 - 0.025 ** 0.25 = 0.602 < 0.9: a miss at the lowest load
    {"cell_id": "s1", "variant": "slow", "c": 1, "tok": 20.0, "good": 5.0, "attain": 0.0,
     "n": 4},
]
GPUS = {c["cell_id"]: 8 for c in CELLS}


def test_capacity_interval_goodput_cost_and_energy_by_hand():
    caps = {c.variant: c for c in capacities(with_windows(CELLS), GPUS, usd_per_gpu_hour=3.0,
                                             j_per_token={"e16": 0.4})}
    base, eagle, slow = caps["baseline"], caps["eagle3"], caps["slow"]
    assert (base.capacity, base.lo, base.hi, base.bracketed) == (4.0, 1.0, 4.0, True)
    assert base.attainment == 1.0
    assert [a.verdict() for a in base.attainments] == ["meets", "undecided", "misses"]
    # goodput at c=4: 300 with replicates 300 + k: [281, 319]; per GPU 300 / 8 = 37.5
    assert (base.goodput_tok_s, base.goodput_tok_s_lo, base.goodput_tok_s_hi) == \
        pytest.approx((300, 281, 319))
    assert base.goodput_per_gpu == pytest.approx(37.5)
    assert (eagle.capacity, eagle.lo, eagle.hi, eagle.bracketed) == (16.0, 4.0, 16.0, False)
    # 8 GPUs x $3 = $24 per hour; at c=16 eagle3 makes 520 tok/s, 500 of them within the
    # SLOs: 24 / 3600 / 520 x 1e6 = 12.8205 $/M output tokens, 24 / 3600 / 500 x 1e6 = 13.3333
    # per million tokens within the SLOs.
    assert eagle.usd_per_mtok == pytest.approx(12.8205, abs=1e-4)
    assert eagle.usd_per_good_mtok == pytest.approx(13.3333, abs=1e-4)
    assert eagle.j_per_token == pytest.approx(0.4)
    assert math.isnan(base.j_per_token)  # no power read there
    # slow misses the SLOs at its lowest load: no capacity, no figures
    assert not slow.served and slow.capacity == -math.inf and slow.attainment == 0.0
    assert (slow.lo, slow.hi) == (-math.inf, -math.inf)
    assert math.isnan(slow.goodput_tok_s) and math.isnan(slow.usd_per_mtok)
    assert slow.describe() == ("slow on coding: does not hold the SLOs even at c=1 (90% of "
                               "requests within the SLOs; attainment there 0%)")
    assert "capacity at least c=16, the highest tested, with 90% of requests" in eagle.describe()
    assert ("(from c=4, the last load shown to meet them; no tested load shown to miss them; "
            "undecided at c=16)") in eagle.describe()
    assert ("(between c=1, the last load shown to meet them, and c=16, the first shown to miss "
            "them; undecided at c=4)") in base.describe()
    measured = eagle.as_json()["attainments"]
    assert measured["16"] == {"attainment": 1.0, "interval": [0.6915, 1.0], "good": 10,
                              "requests": 10, "over_saturated": False, "verdict": "undecided"}


def test_the_variant_that_serves_most_at_the_slo_by_hand():
    caps = capacities(with_windows(CELLS), GPUS)
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
    (best,) = serves_most(capacities(with_windows(cells), {"a1": None, "b1": 1}))
    # a's GPUs are unknown: compared per server, b 101 vs a 100 good tok/s
    assert best["metric"] == "goodput_tok_s" and best["winner"] == "b"
    assert best["margin"] == pytest.approx(0.01)
    assert best["verdict"] == NO_DIFFERENCE


def test_no_capacity_is_claimed_at_or_beyond_an_over_saturated_load():
    # eagle3 misses at no load (as in CELLS), but its c=4 cell was stopped over-saturated: a
    # miss whatever its attainment, so capacity c=1 (not 16), interval c=1 .. c=1.
    cells = [dict(c) for c in CELLS if c["variant"] == "eagle3"]
    cells[1]["stop"] = "over_saturated"
    (eagle,) = capacities(with_windows(cells), GPUS)
    assert (eagle.capacity, eagle.lo, eagle.hi, eagle.bracketed) == (1.0, 1.0, 1.0, True)
    # the same cells without the stop: capacity 16, as above
    cells[1]["stop"] = "target"
    (eagle,) = capacities(with_windows(cells), GPUS)
    assert eagle.capacity == 16.0


def test_a_capacity_with_every_load_undecided_is_undetermined_not_its_top_load():
    # 10 of 10 at c=1, 4 and 16: each interval's low end 0.025 ** (1 / 10) = 0.692 < 0.9, so
    # each is undecided; the point estimates (100 %) held up to c=16, which the rule called the
    # capacity. No load is shown to meet the SLOs: undetermined, no goodput claimed.
    cells = [{"cell_id": f"u{c}", "variant": "eagle3", "c": c, "tok": 10.0 * c, "attain": 1.0,
              "n": 10} for c in (1, 4, 16)]
    (cap,) = capacities(with_windows(cells), {c["cell_id"]: 8 for c in cells})
    assert [a.verdict() for a in cap.attainments] == ["undecided"] * 3
    assert cap.undetermined and not cap.served and math.isnan(cap.goodput_tok_s)
    assert cap.describe() == (
        "eagle3 on coding: capacity undetermined with 90% of requests within the SLOs: no "
        "tested load is shown to meet them (undecided at c=1, c=4, c=16); a load settles as "
        "meeting them with 36 steady-window requests all within them (raise "
        "load.requests_per_stream or add repeats)")
    assert cap.as_json()["undetermined"] is True


def test_repeats_that_disagree_widen_the_attainment_interval():
    # 15 of 20 and 5 of 20: pooled 20 of 40 (0.5); each repeat expects 10, off by 5: Pearson's
    # X^2 = 2 x 25 / (20 x 0.5 x 0.5) = 10 over 1 degree of freedom: dispersion 10. The counts
    # shrink to 2 of 4, whose exact interval is [0.0676, 0.9324] (beta(2, 3) and beta(3, 2)
    # quantiles at 2.5 % and 97.5 %), not 20 of 40's [0.338, 0.662].
    wide = pooled([Attainment(15, 20), Attainment(5, 20)])
    assert (wide.good, wide.requests, wide.dispersion) == (20, 40, pytest.approx(10.0))
    assert wide.interval == pytest.approx((0.0676, 0.9324), abs=1e-4)
    assert wide.as_json()["dispersion"] == 10.0
    # repeats that agree (10 of 20 twice: X^2 = 0) add no width: dispersion 1
    same = pooled([Attainment(10, 20), Attainment(10, 20)])
    assert same.dispersion == 1.0
    assert same.interval == pytest.approx((0.338, 0.662), abs=1e-3)
