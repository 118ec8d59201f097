"""The Pareto frontier and the cost per million tokens on hand-worked cells: every expected
value below is worked out by hand in the comments, from the cells' numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grid.analysis.cellstats import CellStats
from grid.analysis.pareto import frontier_mask, pareto, usd_per_million_tokens

STEPS = np.arange(-20, 21, dtype=float)
"""41 replicates value + k (k = -20..20): the 2.5 % and 97.5 % percentiles (linear rule,
positions 0.025 x 40 = 1 and 0.975 x 40 = 39) are value - 19 and value + 19."""


def stats_of(cells: list[dict]) -> CellStats:
    """CellStats with each cell's replicates of every metric = its value + STEPS."""
    metrics = ("output_tok_s", "goodput_tok_s", "slo_attainment")
    rows, reps = [], {}
    for c in cells:
        row = {"cell_id": c["cell_id"], "variant": c["variant"], "workload": "coding",
               "concurrency": c.get("c"), "rate": c.get("rate", np.nan), "status": "done",
               "output_tok_s": c["tok"], "goodput_tok_s": c.get("good", c["tok"]),
               "slo_attainment": c.get("attain", 1.0), "stop_reason": c.get("stop")}
        rows.append(row)
        reps[c["cell_id"]] = {m: c.get("reps", {}).get(m, row[m] + STEPS) for m in metrics}
    return CellStats(pd.DataFrame(rows), reps)


def test_frontier_mask_by_hand():
    # A(1,5) B(2,4) C(3,1) D(2,3) E(1,5) F(nan,9): D is dominated by B (2 >= 2, 4 > 3); A and E
    # are equal, so neither dominates the other; F has no x: never on it, dominates nothing.
    x = np.array([1, 2, 3, 2, 1, np.nan])
    y = np.array([5, 4, 1, 3, 5, 9])
    assert frontier_mask(x, y).tolist() == [True, True, True, False, True, False]


def test_dollars_per_million_tokens_by_hand():
    # 8 GPUs x $2.50 = $20 per hour = $20 / 3600 per second; at 1000 tok/s that is
    # 20 / 3600 / 1000 dollars per token = 50 / 9 = 5.5556 dollars per million tokens.
    assert usd_per_million_tokens(1000.0, 8, 2.5) == pytest.approx(50 / 9)
    # 1 GPU at $1.80 per hour producing 50 tok/s: 1.8 / 3600 / 50 x 1e6 = 10.0
    assert usd_per_million_tokens(50.0, 1, 1.8) == pytest.approx(10.0)
    assert math.isnan(usd_per_million_tokens(1000.0, 8, None))  # no price: no dollars
    assert math.isnan(usd_per_million_tokens(1000.0, None, 2.5))  # GPUs unknown
    assert math.isnan(usd_per_million_tokens(0.0, 8, 2.5))  # nothing produced


CELLS = [
    {"cell_id": "b1", "variant": "baseline", "c": 1, "tok": 100.0},
    {"cell_id": "b4", "variant": "baseline", "c": 4, "tok": 360.0},
    {"cell_id": "b16", "variant": "baseline", "c": 16, "tok": 800.0},
    {"cell_id": "b32", "variant": "baseline", "c": 32, "tok": 780.0},
    {"cell_id": "e1", "variant": "eagle3", "c": 1, "tok": 150.0},
    # two repeats of eagle3 c=4, both 420 tok/s: no spread between repeats to widen anything
    # (tests/grid/analysis/test_points.py covers that), so the point is 420 and its replicates
    # the mean of theirs, 420 + k: interval [401, 439]
    {"cell_id": "e4a", "variant": "eagle3", "c": 4, "tok": 420.0},
    {"cell_id": "e4b", "variant": "eagle3", "c": 4, "tok": 420.0},
    {"cell_id": "e16", "variant": "eagle3", "c": 16, "tok": 560.0},
    {"cell_id": "x4", "variant": "external", "c": 4, "tok": 5000.0},  # GPUs unknown
    {"cell_id": "o2", "variant": "baseline", "c": None, "rate": 2.0, "tok": 300.0},  # open loop
]
GPUS = {c["cell_id"]: 8 for c in CELLS} | {"x4": None}


def test_frontier_per_user_and_per_gpu_by_hand():
    table = pareto(stats_of(CELLS), GPUS).set_index(["variant", "concurrency"])
    # per user = tok/s / concurrency, per GPU = tok/s / 8:
    #   baseline c=1 (100, 12.5)  c=4 (90, 45)  c=16 (50, 100)  c=32 (24.375, 97.5)
    #   eagle3   c=1 (150, 18.75) c=4 (105, 52.5) c=16 (35, 70)
    expected = {("baseline", 1): (100, 12.5), ("baseline", 4): (90, 45),
                ("baseline", 16): (50, 100), ("baseline", 32): (24.375, 97.5),
                ("eagle3", 1): (150, 18.75), ("eagle3", 4): (105, 52.5),
                ("eagle3", 16): (35, 70)}
    for key, (user, gpu) in expected.items():
        assert table.loc[key, "tok_s_per_user"] == pytest.approx(user)
        assert table.loc[key, "tok_s_per_gpu"] == pytest.approx(gpu)
    # Across variants: eagle3 c=1 (fastest per user) and c=4 (nothing at >= 105 per user has
    # more per GPU) and baseline c=16 (most per GPU) are on it; baseline c=1 loses to eagle3
    # c=1 on both, baseline c=4 to eagle3 c=4, eagle3 c=16 and baseline c=32 to baseline c=16.
    on = {k for k in expected if table.loc[k, "frontier"]}
    assert on == {("eagle3", 1), ("eagle3", 4), ("baseline", 16)}
    # Within each variant only the saturated baseline c=32 is dominated (by its own c=16).
    assert {k for k in expected if not table.loc[k, "variant_frontier"]} == {("baseline", 32)}
    # The repeats' mean and interval: 420 [401, 439]; per user / 4, per GPU / 8.
    e4 = table.loc[("eagle3", 4)]
    assert e4.repeats == 2
    assert (e4.output_tok_s, e4.output_tok_s_lo, e4.output_tok_s_hi) == pytest.approx(
        (420, 401, 439))
    assert (e4.tok_s_per_user_lo, e4.tok_s_per_user_hi) == pytest.approx((100.25, 109.75))
    assert (e4.tok_s_per_gpu_lo, e4.tok_s_per_gpu_hi) == pytest.approx((50.125, 54.875))
    # No GPU count: no per-GPU figure and off every frontier, however fast.
    x4 = table.loc[("external", 4)]
    assert math.isnan(x4.tok_s_per_gpu) and not x4.frontier and not x4.variant_frontier
    assert x4.tok_s_per_user == pytest.approx(1250)
    # Open-loop cells have no fixed number of users: not in the table.
    assert set(table.index.get_level_values("concurrency")) == {1, 4, 16, 32}


def test_cost_and_energy_per_cell_by_hand():
    joules = {"e4a": 0.5, "e4b": 0.7, "b16": float("nan")}
    table = pareto(stats_of(CELLS), GPUS, usd_per_gpu_hour=2.0, j_per_token=joules)
    table = table.set_index(["variant", "concurrency"])
    b16 = table.loc[("baseline", 16)]
    # 8 x $2 = $16 per hour; at 800 tok/s: 16 / 3600 / 800 x 1e6 = 5.5556 $/M tokens; the
    # interval from the throughput's ends, 781 and 819 tok/s: 16 / 3600 / 819 x 1e6 = 5.4267
    # (the faster end is the cheaper one) and 16 / 3600 / 781 x 1e6 = 5.6907.
    assert b16.usd_per_mtok == pytest.approx(5.5556, abs=1e-4)
    assert (b16.usd_per_mtok_lo, b16.usd_per_mtok_hi) == pytest.approx((5.4267, 5.6907),
                                                                        abs=1e-4)
    assert math.isnan(b16.j_per_token)  # power not read there
    assert table.loc[("eagle3", 4), "j_per_token"] == pytest.approx(0.6)  # mean of 0.5, 0.7
    assert math.isnan(table.loc[("external", 4), "usd_per_mtok"])  # GPUs unknown: no price
    # Without a price, no dollar figure anywhere.
    assert pareto(stats_of(CELLS), GPUS).usd_per_mtok.isna().all()
