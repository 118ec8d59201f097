"""A cell row's stop columns (grid/store/stopping.py): the cell's reason from its clients',
and the half-width it reached: the report's own interval of the cell."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from grid.analysis.cellstats import analyse_cells
from grid.plan.cells import make_cell
from grid.plan.stopping import targets_of
from grid.store.stopping import WIDER, stop_columns
from tests.grid.analysis.synthetic import cell_requests
from tests.grid.plan.test_cells import _config


def _cell(target=None, concurrency: int = 4):
    config = _config(concurrency=concurrency)
    config["load"]["target"] = target
    return make_cell({"concurrency": concurrency}, config, "digest")


def _stop(cell, rows, stats) -> dict:
    return stop_columns(cell, targets_of(cell.config["load"]), rows, stats)


def _rows(cell, **kw) -> list[dict]:
    frame = cell_requests(cell.cell_id, cell.concurrency, 50.0, **kw)
    return frame.to_dict("records")


def test_a_cell_reached_its_target_only_if_every_client_did():
    cell = _cell({"metric": "output_tok_s", "half_width": 0.05})
    rows = _rows(cell)
    both = _stop(cell, rows, [{"stop_reason": "target", "stop_detail": "a"},
                                     {"stop_reason": "target", "stop_detail": "b"}])
    assert both["stop_reason"] == "target"
    one = _stop(cell, rows, [{"stop_reason": "target"}, {"stop_reason": "cap"}])
    assert one["stop_reason"] == "cap"
    evidence = json.dumps({"signal": "ttft", "slope": 0.2})
    over = _stop(cell, rows, [{"stop_reason": "cap"},
                                     {"stop_reason": "over_saturated", "stop_detail":
                                      "over-saturated: TTFT rising", "stop_evidence": evidence}])
    assert over["stop_reason"] == "over_saturated"
    assert over["stop_detail"] == "over-saturated: TTFT rising"  # the evidence is kept as is
    assert over["stop_evidence"] == evidence


def test_the_half_width_is_the_reports_interval_of_the_cell():
    cell = _cell({"metric": "output_tok_s", "half_width": 0.05})
    rows = _rows(cell, per_stream=8, jitter=0.05)
    out = _stop(cell, rows, [{"stop_reason": "target"}])
    frame = pd.DataFrame(rows)
    cells = pd.DataFrame([{"cell_id": cell.cell_id, "variant": "baseline", "workload": "coding",
                           "concurrency": cell.concurrency, "rate": float("nan"),
                           "status": "done"}])
    table = analyse_cells(cells, frame).table.iloc[0]
    half = (table.output_tok_s_hi - table.output_tok_s_lo) / 2 / table.output_tok_s
    assert out["stop_half_width"] == pytest.approx(half, rel=1e-9)
    assert out["stop_detail"].startswith("output_tok_s ±") and "target ±5 %" in out["stop_detail"]


def test_a_cap_says_whether_the_target_was_reached():
    cell = _cell({"metric": "output_tok_s", "half_width": 0.001})  # ±0.1 %: out of reach
    out = _stop(cell, _rows(cell, jitter=0.1), [{"stop_reason": "cap"}])
    assert out["stop_reason"] == "cap"
    assert out["stop_detail"].startswith("precision not reached: output_tok_s ±")
    assert out["stop_half_width"] > 0.001


def test_a_target_stop_whose_cell_interval_is_wider_says_so_and_why():
    # ±0.1 % is out of reach of these requests: the client's check met it (as its share, or
    # before its requests in flight finished), the cell's interval over all of them does not
    cell = _cell({"metric": "output_tok_s", "half_width": 0.001})
    rows = _rows(cell, jitter=0.1)
    alone = _stop(cell, rows, [{"stop_reason": "target", "stop_detail": "met"}])
    assert alone["stop_reason"] == "target" and alone["stop_half_width"] > 0.001
    assert alone["stop_detail"].startswith(
        f"{WIDER} (its check met the target before the requests then in flight finished): "
        "precision not reached: output_tok_s ±"), alone["stop_detail"]
    shared = _stop(cell, rows, [{"stop_reason": "target"}, {"stop_reason": "target"}])
    assert shared["stop_detail"].startswith(
        f"{WIDER} (each client met its share of the target): precision not reached: ")


def test_cells_without_a_target_say_count_or_nothing():
    cell = _cell()
    out = _stop(cell, _rows(cell), [{"stop_reason": "count"}])
    assert out == {"stop_reason": "count", "stop_detail": "32 requests", "stop_half_width": None,
                   "stop_evidence": None}
    assert _stop(cell, [], [{}])["stop_reason"] is None  # a client of an older release


def test_a_broken_check_is_named_in_the_detail():
    cell = _cell()
    out = _stop(cell, _rows(cell), [{"stop_reason": "count",
                                            "check_error": "FloatingPointError: x"}])
    assert out["stop_detail"] == "32 requests; the checks stopped: FloatingPointError: x"
