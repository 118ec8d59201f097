"""Points over repeats (grid/analysis/points.py) and what a decision says about them: repeats
widen the intervals, the per-repeat ratios stand beside each comparison, a point whose repeats
disagree is named, and a run of one repeat says its intervals cover within-run noise only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grid.analysis.bootstrap import interval
from grid.analysis.cellstats import CellStats
from grid.analysis.decision import decide
from grid.analysis.points import points

STEPS = np.linspace(-0.02, 0.02, 41)
"""Each cell's replicates: its value x (1 + s), s from -2 % to +2 %: a ±2 % within-cell
interval (positions 1 and 39 of 41: value x (1 ± 0.019))."""


def stats_of(cells: list[tuple[str, str, int, int, float]]) -> CellStats:
    """(cell id, variant, concurrency, repeat, tok/s) -> CellStats with the replicates above."""
    rows, reps = [], {}
    for cell_id, variant, c, repeat, tok in cells:
        rows.append({"cell_id": cell_id, "variant": variant, "workload": "agentic",
                     "concurrency": c, "rate": np.nan, "status": "done", "repeat": repeat,
                     "output_tok_s": tok, "goodput_tok_s": tok, "accept_length": (
                         2.0 if variant != "baseline" else np.nan)})
        reps[cell_id] = {m: tok * (1 + STEPS) for m in ("output_tok_s", "goodput_tok_s")}
    return CellStats(pd.DataFrame(rows), reps)


# The break-even ladder's noisy rung at c=4 (docs/lesson.md): 380 and 707 tok/s in its two
# repeats against a baseline of 1260 and 1270: per-repeat ratios 380 / 1260 = 0.3016 and
# 707 / 1270 = 0.5567, i.e. speedups -69.8 % and -44.3 %.
LADDER = [("b0", "baseline", 4, 0, 1260.0), ("b1", "baseline", 4, 1, 1270.0),
          ("r0", "draft", 4, 0, 380.0), ("r1", "draft", 4, 1, 707.0)]


def test_an_interval_holds_both_repeats_ratios():
    row = decide(stats_of(LADDER)).speedups.iloc[0]
    assert row.speedup == pytest.approx(543.5 / 1265 - 1)      # the means' ratio: -57.0 %
    assert (row.repeat_lo, row.repeat_hi) == pytest.approx((380 / 1260 - 1, 707 / 1270 - 1))
    assert row.lo <= 380 / 1260 - 1 and row.hi >= 707 / 1270 - 1
    # Within-cell noise alone (the method before): 543.5 x (1 ± 0.019) over 1265 x (1 ± 0.019),
    # about -57 % ± 2 %: it holds neither repeat's ratio.
    within = {p.variant: p for p in points(stats_of(LADDER), ("output_tok_s",), "within")}
    lo, hi = interval(within["draft"].replicates["output_tok_s"]
                      / within["baseline"].replicates["output_tok_s"] - 1)
    assert -0.60 < lo and hi < -0.54
    assert not (lo <= 380 / 1260 - 1) and not (hi >= 707 / 1270 - 1)


def test_repeats_that_disagree_are_named():
    decision = decide(stats_of(LADDER))
    # 380 x 1.019 = 387 < 707 x 0.981 = 694: the draft's repeats do not overlap; the
    # baseline's (1260 x 1.019 = 1284 > 1270 x 0.981 = 1246) do.
    flagged = decision.repeats["disagreeing"]
    assert [(d["variant"], d["load"]) for d in flagged] == [("draft", 4)]
    assert flagged[0]["by_repeat"] == {"0": 380.0, "1": 707.0}
    lines = decision.lines()
    assert ("repeats disagree beyond their own intervals: draft on agentic at c=4: 380, "
            "707 tok/s") in lines
    assert any(line.startswith("intervals cover the spread between repeats (up to 2 per cell")
               for line in lines)
    assert "(repeats -70%..-44%)" in lines[0]
    assert decision.as_json()["repeats"]["most"] == 2


def test_one_repeat_says_what_its_intervals_cover():
    one = [("b0", "baseline", 1, 0, 100.0), ("e0", "eagle3", 1, 0, 110.0)]
    decision = decide(stats_of(one))
    assert ("intervals cover within-run noise only (one repeat per cell); to cover what varies "
            "from run to run, add repeats: grid.axes.repeat=[0,1,2]") in decision.lines()
    row = decision.speedups.iloc[0]
    assert math.isnan(row.repeat_lo) and math.isnan(row.repeat_hi)
    # 110 x (1 ± 0.019) / 100 x (1 ± 0.019): +10 % within about ±4 %, unwidened.
    assert row.lo > 0.05 and row.hi < 0.15


def test_three_agreeing_repeats_widen_little():
    # Repeats 99, 100, 101 (baseline) and 119, 120, 121: relative sd ~1 %, pooled over both
    # points (4 degrees of freedom, t = 2.776): the speedup of +20 % stays significant.
    cells = [(f"b{r}", "baseline", 8, r, 99.0 + r) for r in range(3)] + [
        (f"e{r}", "eagle3", 8, r, 119.0 + r) for r in range(3)]
    decision = decide(stats_of(cells))
    row = decision.speedups.iloc[0]
    assert row.verdict == "faster" and 0.12 < row.lo < 0.2 < row.hi < 0.28
    assert decision.repeats["disagreeing"] == []
    assert decision.repeats["dof"] == 4


def test_a_variant_whose_repeats_vary_more_gets_its_own_noise():
    # The baseline's repeats agree exactly (100 x 3 at c=1, 200 x 3 at c=2); EAGLE-3's sit at
    # logs -0.1, 0, +0.1 around each: squares 0.02 a point, 2 degrees: its pool 0.04 / 4 = 0.01
    # at 4 degrees, above the baseline's 0 by more than any F point: its own. The baseline keeps
    # the run's, 0.04 / 8 = 0.005 at 8 degrees. Constant replicates (no within noise): the log
    # of a replicate over the point is sqrt(variance / 3) times Student's t: EAGLE-3 at 4
    # degrees, ±2.776 x sqrt(0.01 / 3) = ±0.1603 (one pool for the run gave it 0.01 at 8
    # degrees: ±2.306 x 0.0577 = ±0.1331); the baseline at 8, ±2.306 x sqrt(0.005 / 3) = ±0.0941.
    b = 40000
    rows, reps = [], {}
    for c, scale in ((1, 100.0), (2, 200.0)):
        for r, log in enumerate((-0.1, 0.0, 0.1)):
            for variant, tok in (("baseline", scale), ("eagle3", scale * math.exp(log))):
                cell = f"{variant}-{c}-{r}"
                rows.append({"cell_id": cell, "variant": variant, "workload": "agentic",
                             "concurrency": c, "rate": np.nan, "status": "done", "repeat": r,
                             "output_tok_s": tok, "goodput_tok_s": tok, "accept_length": (
                                 2.0 if variant == "eagle3" else np.nan)})
                reps[cell] = {m: np.full(b, tok) for m in ("output_tok_s", "goodput_tok_s")}
    stats = CellStats(pd.DataFrame(rows), reps)
    got = {(p.variant, p.load): p for p in points(stats, ("output_tok_s",))}
    for (variant, half) in (("eagle3", 0.1603), ("baseline", 0.0941)):
        p = got[variant, 1]
        logs = np.log(p.replicates["output_tok_s"] / p.values["output_tok_s"])
        assert np.percentile(logs, [2.5, 97.5]) == pytest.approx((-half, half), abs=0.006)
    assert ("eagle3's repeats spread more than the other variants': its own between-repeat sd "
            "10.0 % (4 degrees of freedom)") in decide(stats).lines()
