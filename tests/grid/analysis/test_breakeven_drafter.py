"""The drafter placed on hand-worked break-even curves (grid/analysis/breakeven_drafter.py): the
contiguous range of loads where it pays, unknown beyond the lengths measured, a later load that
pays again noted and not claimed."""

from __future__ import annotations

import pandas as pd
import pytest

from grid.analysis.breakeven import Level, curves
from grid.analysis.breakeven_drafter import drafters, place
from tests.grid.analysis.test_breakeven import _cell, surface


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
    assert placed["coding"].stop == placed["coding"].note == ""
    # chat 1.5: below a* everywhere
    assert placed["chat"].pays_up_to is None and placed["chat"].maybe_up_to is None


def test_a_length_past_the_longest_measured_is_unknown_there_not_paying():
    # c=8 loses at every length (0.6, 0.8, 0.95 at 1.5, 2.5, 3.5): a* >= 3.5, its interval
    # open above. A drafter of 3.8 pays at c=1 (a* 1.83) and is unknown at c=8: the range
    # ends at c=1 and says why.
    stats, cells = surface({1: (90.0, 120.0, 150.0), 8: (60.0, 80.0, 95.0)})
    d = place(curves(stats, cells), "eagle3", "coding", "coding", (10, 3.8, 3.6, 4.0))
    assert [v[1] for v in d.verdicts] == ["pays", "unknown above 3.50"]
    assert d.pays_up_to == 1.0 and d.stop == "c=8: unknown above 3.50"
    # its lower end 3.6 clears c=1's upper end (2.01); at c=8 the upper end is the longest
    # length (3.5, open): unknown again; its upper end 4.0 likewise
    assert (d.surely_up_to, d.maybe_up_to) == (1.0, 1.0)
    assert d.verdicts[1][2:] == ("unknown above 3.50", "unknown above 3.50")
    assert d.describe().endswith("pays up to c=1 [c=1, c=1]; c=8: unknown above 3.50")
    assert d.as_json()["stop"] == "c=8: unknown above 3.50"


def test_a_length_short_of_a_curve_that_pays_everywhere_is_unknown():
    # c=1 pays at the shortest length (1.05 at 1.5): a* <= 1.5. A drafter of 1.2 [1.1, 1.3]:
    # unknown at c=1, so it pays up to no load, and says so
    stats, cells = surface({1: (105.0, 120.0, 150.0)})
    d = place(curves(stats, cells), "eagle3", "coding", "coding", (10, 1.2, 1.1, 1.3))
    assert d.verdicts == ((1.0, "unknown below 1.50", "does not pay", "unknown below 1.50"),)
    assert d.pays_up_to is None and d.stop == "c=1: unknown below 1.50"


def test_a_load_that_pays_again_after_a_dip_is_noted_not_claimed():
    # c=1 ratios 0.9, 1.2, 1.5: a* = 1.83; c=2 (a dip) 0.6, 0.9, 1.1: a* = 2.5 + 0.1 / 0.2 =
    # 3.0; c=4 0.8, 1.2, 1.4: a* = 1.5 + 0.2 / 0.4 = 2.0. A drafter of 2.5 pays at c=1 and c=4,
    # not at c=2: it pays up to c=1 (the highest load where it clears a* would be c=4)
    stats, cells = surface({1: (90.0, 120.0, 150.0), 2: (60.0, 90.0, 110.0),
                            4: (80.0, 120.0, 140.0)})
    d = place(curves(stats, cells), "eagle3", "coding", "coding", (10, 2.5, 2.5, 2.5))
    assert [v[1] for v in d.verdicts] == ["pays", "does not pay", "pays"]
    assert d.pays_up_to == 1.0 and d.stop == ""
    assert d.note == "pays again at c=4 after c=2 (not claimed)"
    assert d.describe().endswith("pays up to c=1 [c=1, c=1]; pays again at c=4 after c=2 "
                                 "(not claimed)")


def test_surely_and_maybe_are_unknown_past_an_open_end_of_the_interval():
    # a* = 3.0 [2.8, >=3.5]: a lower end of 3.6 clears 3.5, but a* may lie above it
    high = Level("eagle3", "coding", 1.0, (1.5, 3.5), (0.8, 1.1), 3.0, "inside", 2.8, 3.5,
                 hi_open=True)
    assert high.surely(3.6) == "unknown above 3.50" and high.surely(3.2) == "does not pay"
    # a* = 2.0 [<=1.5, 2.4]: an upper end of 1.4 is short of 1.5, but a* may lie below it
    low = Level("eagle3", "coding", 1.0, (1.5, 3.5), (0.95, 1.2), 2.0, "inside", 1.5, 2.4,
                lo_open=True)
    assert low.maybe(1.4) == "unknown below 1.50" and low.maybe(1.6) == "pays"
    d = place([high], "eagle3", "coding", "x", (10, 3.7, 3.6, 3.8))
    assert (d.pays_up_to, d.surely_up_to, d.maybe_up_to) == (1.0, None, 1.0)
