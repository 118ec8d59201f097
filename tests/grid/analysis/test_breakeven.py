"""The break-even length and its interval on a hand-worked surface (grid/analysis/breakeven.py),
and the drafter placed on it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grid.analysis.breakeven import configuration, crossing, curves, drafters
from grid.analysis.cellstats import CellStats

R = 1000
# Baseline 100 tok/s at c=1 and c=8 (replicates all 100). The forced cells at lengths 1.5,
# 2.5, 3.5: at c=1 90, 120, 150 tok/s; at c=8 60, 90, 110. Half of each forced cell's
# replicates are its value x 0.95, half x 1.05 (the same factor at every length of a
# replicate: the cells of one load drawn together, for a hand-worked interval).
SURFACE = {1: (90.0, 120.0, 150.0), 8: (60.0, 90.0, 110.0)}
LENGTHS = (1.5, 2.5, 3.5)
FACTOR = np.where(np.arange(R) < R // 2, 0.95, 1.05)


def _cell(cell_id, variant, c, tok_s, length=None):
    forced = None if length is None else json.dumps({"length": length, "mean_length": length})
    return {"cell_id": cell_id, "variant": variant, "workload": "coding", "concurrency": c,
            "rate": np.nan, "status": "done", "output_tok_s": tok_s, "goodput_tok_s": tok_s,
            "forced_acceptance": forced}


def surface() -> tuple[CellStats, pd.DataFrame]:
    rows, reps = [], {}
    for c, values in SURFACE.items():
        rows.append(_cell(f"b{c}", "baseline", c, 100.0))
        reps[f"b{c}"] = {"output_tok_s": np.full(R, 100.0), "goodput_tok_s": np.full(R, 100.0)}
        for a, v in zip(LENGTHS, values, strict=True):
            cid = f"f{c}-{a}"
            rows.append(_cell(cid, f"eagle3__forced_len-{a}", c, v, a))
            reps[cid] = {"output_tok_s": v * FACTOR, "goodput_tok_s": v * FACTOR}
    cells = pd.DataFrame(rows)
    return CellStats(cells.drop(columns="forced_acceptance"), reps), cells


def test_the_crossing_interpolates_between_the_lengths_around_it():
    assert crossing([1.5, 2.5, 3.5], [0.9, 1.2, 1.5]).value == pytest.approx(1.5 + 0.1 / 0.3)
    assert crossing([1.5, 2.5, 3.5], [1.1, 1.2, 1.5]) == crossing([1.5], [1.1])  # below
    assert crossing([1.5, 2.5, 3.5], [0.5, 0.6, 0.9]).where == "above"


def test_the_curve_and_its_interval_on_the_hand_worked_surface():
    stats, cells = surface()
    c1, c8 = curves(stats, cells)
    assert (c1.configuration, c1.load, c8.load) == ("eagle3", 1.0, 8.0)
    # c=1: ratios 0.9, 1.2, 1.5: a* = 1.5 + (1 - 0.9) / (1.2 - 0.9) = 1.8333
    assert c1.value == pytest.approx(1.5 + 0.1 / 0.3) and c1.where == "inside"
    # c=8: ratios 0.6, 0.9, 1.1: a* = 2.5 + (1 - 0.9) / (1.1 - 0.9) = 3.0
    assert c8.value == pytest.approx(3.0)
    # the replicates at x0.95 (ratios 0.855, 1.14, 1.425): 1.5 + 0.145 / 0.285 = 2.0088;
    # at x1.05 (0.945, 1.26, 1.575): 1.5 + 0.055 / 0.315 = 1.6746; half each: the 2.5 and
    # 97.5 percentiles are the two values
    assert (c1.lo, c1.hi) == pytest.approx((1.5 + 0.055 / 0.315, 1.5 + 0.145 / 0.285))
    # c=8 at x0.95 (0.57, 0.855, 1.045): 2.5 + 0.145 / 0.19; at x1.05 (0.63, 0.945, 1.155):
    # 2.5 + 0.055 / 0.21
    assert (c8.lo, c8.hi) == pytest.approx((2.5 + 0.055 / 0.21, 2.5 + 0.145 / 0.19))
    assert not (c1.lo_open or c1.hi_open)


def test_an_interval_past_the_lengths_measured_is_open():
    stats, cells = surface()
    stats.replicates["f8-3.5"]["output_tok_s"] = 110.0 * np.where(FACTOR > 1, 1.0, 0.85)
    c8 = curves(stats, cells)[1]
    assert c8.hi == pytest.approx(3.5) and c8.hi_open  # some replicates never reach 1


def test_the_forced_part_of_a_label_is_not_the_configuration():
    assert configuration("eagle3__forced_len-2.5") == "eagle3"
    assert configuration("eagle3__speculative_num_steps-7__forced_rates-0.8_0.6") == \
        "eagle3__speculative_num_steps-7"
    assert configuration("eagle3__forced_len-3__temperature-0.5") == "eagle3__temperature-0.5"


def test_the_drafter_pays_up_to_the_highest_load_its_length_clears():
    stats, cells = surface()
    # the drafter's own (unforced) cell: coding prompts accept 2.5 decode tokens per step
    # (4 requests of 61 tokens in 24 steps), chat prompts 1.5 (31 tokens in 20 steps)
    cells = pd.concat([cells, pd.DataFrame([_cell("u1", "eagle3", 1, 130.0)])])
    requests = pd.DataFrame(
        [{"cell_id": "u1", "workload": "coding", "status": "ok", "domain": "coding",
          "output_tokens": 61, "spec_verify_ct": 24}] * 4
        + [{"cell_id": "u1", "workload": "coding", "status": "ok", "domain": "chat",
            "output_tokens": 31, "spec_verify_ct": 20}] * 4)
    placed = {d.domain: d for d in drafters(curves(stats, cells), requests, cells)}
    # coding 2.5: above a* at c=1 (1.83), below at c=8 (3.0): pays up to c=1
    assert placed["coding"].length == pytest.approx(2.5)
    assert placed["coding"].pays_up_to == 1.0
    # identical requests: the interval is the point; it clears c=1's upper end (2.01)
    assert placed["coding"].surely_up_to == placed["coding"].maybe_up_to == 1.0
    # chat 1.5: below a* everywhere
    assert placed["chat"].pays_up_to is None and placed["chat"].maybe_up_to is None


def ladder() -> tuple[CellStats, pd.DataFrame]:
    """Baseline 100 tok/s at c=1 and c=4; three rungs of a drafter ladder (nothing forced),
    measured accept lengths 4.6, 2.8, 1.4 (given out of order: the curve sorts them), at c=1
    130, 105, 70 tok/s and at c=4 110, 85, 50. Replicates +-5 % as in `surface`, except the
    c=4 rung at 2.8 whose replicates are 80 and 90 (ratio 0.80 and 0.90: below 1)."""
    rows, reps = [], {}
    rungs = {"noise-0.00": (4.6, {1: 130.0, 4: 110.0}), "noise-0.35": (1.4, {1: 70.0, 4: 50.0}),
             "noise-0.20": (2.8, {1: 105.0, 4: 85.0})}
    for c in (1, 4):
        rows.append({**_cell(f"b{c}", "baseline", c, 100.0), "accept_length_decode": np.nan})
        reps[f"b{c}"] = {"output_tok_s": np.full(R, 100.0), "goodput_tok_s": np.full(R, 100.0)}
        for rung, (length, tok_s) in rungs.items():
            cid = f"{rung}-c{c}"
            rows.append({**_cell(cid, f"draft__draft-{rung}", c, tok_s[c]),
                         "accept_length_decode": length})
            reps[cid] = {"output_tok_s": tok_s[c] * FACTOR, "goodput_tok_s": tok_s[c] * FACTOR}
    reps["noise-0.20-c4"]["output_tok_s"] = np.where(FACTOR > 1, 90.0, 80.0)
    cells = pd.DataFrame(rows)
    return CellStats(cells.drop(columns="forced_acceptance"), reps), cells


def test_a_ladder_of_drafters_gives_the_curve_at_their_measured_lengths():
    stats, cells = ladder()
    c1, c4 = curves(stats, cells)
    assert (c1.kind, c1.configuration, c1.lengths) == ("ladder", "draft", (1.4, 2.8, 4.6))
    assert c1.rungs == ("draft__draft-noise-0.35", "draft__draft-noise-0.20",
                        "draft__draft-noise-0.00")
    # c=1: ratios 0.70, 1.05, 1.30: a* = 1.4 + (1 - 0.7) / (1.05 - 0.7) x 1.4 = 2.6
    assert c1.value == pytest.approx(2.6)
    # c=4: ratios 0.50, 0.85, 1.10: a* = 2.8 + (1 - 0.85) / (1.10 - 0.85) x 1.8 = 3.88
    assert c4.value == pytest.approx(3.88)
    # each rung's verdict beside its measured speedup: at c=1 the 2.8 rung (1.05, replicates
    # 0.9975 and 1.1025) has no sign; at c=4 the 2.8 rung is below 1 for certain and below a*
    assert [c1.agrees(a, r) for a, r in zip(c1.lengths, c1.rung_ratios, strict=True)] == \
        [True, None, True]
    assert c4.rung_ratios[1] == pytest.approx((0.80, 0.90))
    assert c4.verdict(2.8) == "does not pay" and c4.agrees(2.8, c4.rung_ratios[1]) is True
    rungs = c4.as_json()["rungs"]
    assert [r["verdict"] for r in rungs] == ["does not pay", "does not pay", "pays"]


def test_the_draft_part_of_a_label_is_not_the_configuration():
    assert configuration("tiny_trained_draft__draft-noise-0.20") == "tiny_trained_draft"
    assert configuration("eagle3__draft-noise-0.20__temperature-0.5") == "eagle3__temperature-0.5"


def test_a_predicted_level_is_the_crossing_of_its_ratios_without_an_interval():
    from grid.analysis.breakeven import predicted_level

    # ratios 0.9, 1.2, 1.5 at 1.5, 2.5, 3.5: a* = 1.5 + 0.1 / 0.3 = 1.8333, the interval the point
    lv = predicted_level("eagle3", "coding", 4.0, LENGTHS, [0.9, 1.2, 1.5])
    assert (lv.value, lv.where) == (pytest.approx(1.5 + 0.1 / 0.3), "inside")
    assert lv.lo == lv.hi == lv.value and lv.load == 4.0
    assert predicted_level("eagle3", "coding", 64.0, LENGTHS, [0.5, 0.6, 0.9]).where == "above"
