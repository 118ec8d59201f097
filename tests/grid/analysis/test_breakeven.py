"""The break-even length and its interval on hand-worked surfaces (grid/analysis/breakeven.py):
forced cells at their measured length, those not honoured left out, ladders with each
replicate's length drawn with its throughput, checked out of sample, and refused when their
rungs differ in shape."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grid.analysis.breakeven import (
    Level,
    configuration,
    crossing,
    curves,
    judge,
    ladder_refusals,
    left_one_out,
)
from grid.analysis.cellstats import DECODE_FACTOR, CellStats

R = 1000
# Baseline 100 tok/s at c=1 and c=8 (replicates all 100). The forced cells at lengths 1.5,
# 2.5, 3.5: at c=1 90, 120, 150 tok/s; at c=8 60, 90, 110. Half of each forced cell's
# replicates are its value x 0.95, half x 1.05 (the same factor at every length of a
# replicate: the cells of one load drawn together, for a hand-worked interval).
SURFACE = {1: (90.0, 120.0, 150.0), 8: (60.0, 90.0, 110.0)}
LENGTHS = (1.5, 2.5, 3.5)
FACTOR = np.where(np.arange(R) < R // 2, 0.95, 1.05)


def _cell(cell_id, variant, c, tok_s, length=None, measured=None):
    """A done cell; forced at `length` (its decode length measured as `measured`, default the
    forced one: honoured exactly)."""
    forced = None if length is None else json.dumps({"length": length, "mean_length": length})
    decode = length if measured is None else measured
    return {"cell_id": cell_id, "variant": variant, "workload": "coding", "concurrency": c,
            "rate": np.nan, "status": "done", "output_tok_s": tok_s, "goodput_tok_s": tok_s,
            "forced_acceptance": forced, "accept_length_decode": decode}


def surface(values: dict[int, tuple[float, ...]] | None = None,
            measured: dict[str, float] | None = None) -> tuple[CellStats, pd.DataFrame]:
    """The forced cells of `values` (default SURFACE) at LENGTHS; `measured`: cell id -> its
    decode length where it is not the forced one."""
    rows, reps = [], {}
    for c, tok_s in (SURFACE if values is None else values).items():
        rows.append(_cell(f"b{c}", "baseline", c, 100.0))
        reps[f"b{c}"] = {"output_tok_s": np.full(R, 100.0), "goodput_tok_s": np.full(R, 100.0)}
        for a, v in zip(LENGTHS, tok_s, strict=True):
            cid = f"f{c}-{a}"
            rows.append(_cell(cid, f"eagle3__forced_len-{a}", c, v, a, (measured or {}).get(cid)))
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
    assert c4.rung_ratios[1] == pytest.approx((0.80, 0.90))
    # no length replicates given: each rung's length interval is its point
    assert c1.rung_lengths == ((1.4, 1.4), (2.8, 2.8), (4.6, 4.6))


def test_each_rung_is_judged_by_the_curve_fitted_without_it():
    stats, cells = ladder()
    c1, c4 = curves(stats, cells)
    # c=1, ratios 0.70, 1.05, 1.30 at 1.4, 2.8, 4.6:
    # - without 1.4: 2.8 already pays (1.05): a* <= 2.8, and 1.4 lies short of it: unknown;
    # - without 2.8: a* = 1.4 + (1 - 0.7) / (1.3 - 0.7) x 3.2 = 3.0: 2.8 does not pay, but
    #   its speedup's interval [0.9975, 1.1025] holds 1: no sign;
    # - without 4.6: a* = 1.4 + 0.3 / 0.35 x 1.4 = 2.6 and 2.8 already pays there: 4.6 pays,
    #   its interval [1.235, 1.365] above 1: agrees.
    assert c1.held_out_verdicts == ("unknown below 2.80", "does not pay", "pays")
    assert c1.held_out() == {"agree": 1, "disagree": 0, "no_sign": 1, "unknown": 1}
    # c=4, ratios 0.50, 0.85, 1.10:
    # - without 1.4: a* = 2.8 + 0.15 / 0.25 x 1.8 = 3.88: 1.4 does not pay, [0.475, 0.525]:
    #   agrees;
    # - without 2.8: a* = 1.4 + 0.5 / 0.6 x 3.2 = 4.07: 2.8 does not pay, [0.80, 0.90]: agrees;
    # - without 4.6: 0.50 and 0.85 both lose: a* >= 2.8, and 4.6 lies beyond: unknown.
    assert c4.held_out_verdicts == ("does not pay", "does not pay", "unknown above 2.80")
    assert c4.held_out() == {"agree": 2, "disagree": 0, "no_sign": 0, "unknown": 1}
    rungs = c4.as_json()["rungs"]
    assert [r["held_out_agrees"] for r in rungs] == [True, True, None]
    assert c4.as_json()["held_out"]["agree"] == 2


def test_a_rung_the_others_misjudge_is_counted_as_disagreeing():
    # ratios 0.8, 1.1, 0.9 at 1, 2, 3 (the 3 rung measured below 1 for certain, [0.85,
    # 0.95]): without it a* = 1 + (1 - 0.8) / (1.1 - 0.8) = 1.67, so 3 "pays": a disagreement
    assert left_one_out([1.0, 2.0, 3.0], [0.8, 1.1, 0.9])[2] == "pays"
    lv = Level("d", "w", 1.0, (1.0, 2.0, 3.0), (0.8, 1.1, 0.9), 1.67, "inside", 1.6, 1.7,
               kind="ladder", rung_ratios=((0.75, 0.85), (1.05, 1.15), (0.85, 0.95)),
               held_out_verdicts=left_one_out([1.0, 2.0, 3.0], [0.8, 1.1, 0.9]))
    # without 1: a* = 2 (1.1 at 2, 0.9 at 3: the first crossing is at 2, `below`): 1 is short
    # of it, unknown; without 2: 0.8 and 0.9 lose: 2 is inside them, does not pay, but
    # measured 1.1 [1.05, 1.15]: disagrees too
    assert lv.held_out_verdicts == ("unknown below 2.00", "does not pay", "pays")
    assert lv.held_out() == {"agree": 0, "disagree": 2, "no_sign": 0, "unknown": 1}


def test_the_draft_part_of_a_label_is_not_the_configuration():
    assert configuration("tiny_trained_draft__draft-noise-0.20") == "tiny_trained_draft"
    assert configuration("eagle3__draft-noise-0.20__temperature-0.5") == "eagle3__temperature-0.5"


def test_beyond_the_lengths_measured_the_verdict_is_unknown():
    # c=1 already pays at the shortest length (1.05 at 1.5): a* <= 1.5; c=8 loses at the
    # longest (0.95 at 3.5): a* >= 3.5
    stats, cells = surface({1: (105.0, 120.0, 150.0), 8: (60.0, 80.0, 95.0)})
    c1, c8 = curves(stats, cells)
    assert (c1.where, c1.value, c8.where, c8.value) == ("below", 1.5, "above", 3.5)
    assert c1.verdict(1.5) == "pays" and c1.verdict(1.2) == "unknown below 1.50"
    # 3.5 lost, so 3.0 does not pay; 3.8 was never measured: unknown, not "pays"
    assert c8.verdict(3.0) == "does not pay" and c8.verdict(3.8) == "unknown above 3.50"
    assert judge(2.0, 1.83, "inside") == "pays" and judge(1.83, 1.83, "inside") == "does not pay"


def test_forced_cells_enter_at_their_measured_length_and_those_not_honoured_are_left_out():
    # c=1: forced 2.5 measured 2.4 (-4 %: honoured), forced 3.5 measured 2.8 (-20 %: left
    # out). The curve keeps (1.5, 0.9) and (2.4, 1.2): a* = 1.5 + 0.1 / 0.3 x 0.9 = 1.8 (at
    # the forced lengths it would be 1.83)
    stats, cells = surface(measured={"f1-2.5": 2.4, "f1-3.5": 2.8})
    c1 = curves(stats, cells)[0]
    assert c1.lengths == (1.5, 2.4) and c1.value == pytest.approx(1.8)
    assert c1.left_out == ("eagle3__forced_len-3.5 c=1: forced 3.5, measured 2.80 (-20.0%: "
                           "FLAGGED, beyond ±10%)",)
    assert "f1-3.5" not in c1.cell_ids and c1.as_json()["left_out"] == list(c1.left_out)
    # a forced cell with no decode length is not honoured either (its accept_length, which
    # counts the prefill token, is not taken instead)
    cells.loc[cells.cell_id == "f8-1.5", "accept_length_decode"] = np.nan
    cells["accept_length"] = 2.0
    c8 = curves(stats, cells)[1]
    assert c8.lengths == (2.5, 3.5) and "no decode accept length measured" in c8.left_out[0]


def test_a_ladders_lengths_are_resampled_with_their_throughputs():
    """Two rungs at c=1: 2.0 at ratio 0.8 (no spread) and 4.0 at 1.2, whose replicates draw
    the same requests for both figures: half of them 3.8 with ratio 1.1, half 4.2 with 1.3."""
    rows, reps = [_cell("b", "baseline", 1, 100.0)], {"b": {"output_tok_s": np.full(R, 100.0)}}
    for cid, length, tok_s in (("r1", 2.0, 80.0), ("r2", 4.0, 120.0)):
        rows.append({**_cell(cid, f"draft__draft-{cid}", 1, tok_s), "accept_length_decode": length})
    # the length replicates are factors on the cell's length: 4.0 x 1.05 = 4.2, x 0.95 = 3.8
    reps["r1"] = {"output_tok_s": np.full(R, 80.0), DECODE_FACTOR: np.full(R, 1.0)}
    reps["r2"] = {"output_tok_s": np.where(FACTOR > 1, 130.0, 110.0),
                  DECODE_FACTOR: np.where(FACTOR > 1, 1.05, 0.95)}
    cells = pd.DataFrame(rows)
    lv = curves(CellStats(cells.drop(columns="forced_acceptance"), reps), cells)[0]
    # the point: a* = 2 + (1 - 0.8) / (1.2 - 0.8) x 2 = 3.0
    assert lv.value == pytest.approx(3.0)
    # replicates: 2 + 0.2 / 0.3 x 1.8 = 3.2 and 2 + 0.2 / 0.5 x 2.2 = 2.88, half each (with
    # the length held at 4.0 they would be 3.33 and 2.8)
    assert (lv.lo, lv.hi) == pytest.approx((2.88, 3.2))
    assert lv.rung_lengths[1] == pytest.approx((3.8, 4.2))


def test_a_ladder_whose_rungs_differ_in_shape_is_refused(tmp_path):
    stats, cells = ladder()
    for rung, layers in (("noise-0.00", 4), ("noise-0.20", 4), ("noise-0.35", 2)):
        folder = tmp_path / rung
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(
            {"num_hidden_layers": layers, "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}))
    cells["server_args"] = [
        json.dumps({"speculative_algorithm": "STANDALONE", "speculative_num_steps": 4,
                    **({} if v == "baseline" else
                       {"speculative_draft_model_path": str(tmp_path / v.split("-", 1)[1])})})
        for v in cells.variant]
    line = ("ladder draft not drawn: its rungs' draft models differ in shape "
            "(draft__draft-noise-0.00: num_hidden_layers=4, hidden_size=64, intermediate_size="
            "128, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000; "
            "draft__draft-noise-0.35: num_hidden_layers=2, hidden_size=64, intermediate_size="
            "128, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000); a ladder "
            "needs drafters of one cost per pass")
    assert ladder_refusals(cells) == {"draft": line}
    assert curves(stats, cells) == []
    # one shape: drawn, at the depth its cells record
    (tmp_path / "noise-0.35" / "config.json").write_text(
        (tmp_path / "noise-0.00" / "config.json").read_text())
    assert ladder_refusals(cells) == {} and [lv.depth for lv in curves(stats, cells)] == [4, 4]
