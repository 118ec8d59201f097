"""Forced cells (grid/analysis/forced.py): honoured or flagged by how much, and kept out of
the losslessness check and the recommendation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grid.analysis.cellstats import CellStats
from grid.analysis.forced import forced_mask, honoured, unforced
from grid.analysis.lossless import lossless_table


def _cells() -> pd.DataFrame:
    forced = json.dumps({"length": 2.5, "mean_length": 2.5})
    return pd.DataFrame([
        {"cell_id": "a", "variant": "eagle3__forced_len-2.5", "workload": "w", "concurrency": 1,
         "status": "done", "forced_acceptance": forced, "accept_length_decode": 2.4,
         "accept_length": 2.6, "temperature": 0.0, "rate": np.nan},
        {"cell_id": "b", "variant": "eagle3__forced_len-2.5", "workload": "w", "concurrency": 8,
         "status": "done", "forced_acceptance": forced, "accept_length_decode": 1.9,
         "accept_length": 2.0, "temperature": 0.0, "rate": np.nan},
        {"cell_id": "c", "variant": "eagle3__forced_len-2.5", "workload": "w", "concurrency": 4,
         "status": "done", "forced_acceptance": forced, "accept_length_decode": None,
         "accept_length": None, "temperature": 0.0, "rate": np.nan},
        {"cell_id": "d", "variant": "baseline", "workload": "w", "concurrency": 1,
         "status": "done", "forced_acceptance": None, "accept_length_decode": None,
         "accept_length": None, "temperature": 0.0, "rate": np.nan},
    ])


def test_a_forced_cell_is_honoured_within_the_tolerance_else_flagged_by_how_much():
    t = honoured(_cells()).set_index("cell_id")
    assert list(t.index) == ["a", "b", "c"]  # the baseline is not forced
    # 2.4 against 2.5: -4 %, within ±10 %
    assert t.loc["a", "honoured"] and t.loc["a", "difference"] == pytest.approx(-0.04)
    assert t.loc["a", "statement"] == "forced 2.5, measured 2.40 (-4.0%, within ±10%)"
    # 1.9 against 2.5: -24 %, flagged
    assert not t.loc["b", "honoured"]
    assert t.loc["b", "statement"] == "forced 2.5, measured 1.90 (-24.0%: FLAGGED, beyond ±10%)"
    # no verify steps counted: nothing shows the forcing took effect
    assert not t.loc["c", "honoured"] and "not shown to be honoured" in t.loc["c", "statement"]


def test_forced_cells_are_left_out_of_the_recommendation_and_the_lossless_check():
    cells = _cells()
    assert list(forced_mask(cells)) == [True, True, True, False]
    stats = CellStats(cells[["cell_id", "variant"]], {})
    assert list(unforced(stats, cells).table.cell_id) == ["d"]
    requests = pd.DataFrame([
        {"cell_id": cid, "prompt_id": "p", "status": "ok", "sent_at": 0.0,
         "output_hash": "h" if cid == "d" else "x", "output_text": "t"} for cid in "abd"])
    # without the filter the forced variant would be compared (and flagged: its outputs
    # differ from the baseline's); with it there is nothing to compare
    assert lossless_table(requests, cells).empty
    cells.loc[cells.cell_id == "a", "forced_acceptance"] = None
    assert list(lossless_table(requests, cells).variant) == ["eagle3__forced_len-2.5"]


def test_a_cell_with_only_the_prefill_counting_length_is_not_shown_honoured():
    # accept_length 2.5 equals the forced 2.5, but it counts the token prefill makes: with no
    # decode length measured nothing shows the forcing took effect
    cells = _cells().iloc[[0]].assign(accept_length_decode=None, accept_length=2.5)
    row = honoured(cells).iloc[0]
    assert not row.honoured and row.measured_length is None
    assert row.statement == ("forced 2.5, no decode accept length measured (no verify steps "
                             "counted): not shown to be honoured")
