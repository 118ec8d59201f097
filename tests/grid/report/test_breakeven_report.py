"""The report's break-even section (grid/report/breakeven.py) on the hand-worked surfaces of
tests/grid/analysis/test_breakeven.py: labelled, honoured or flagged and left out, the drafter
placed, a ladder checked out of sample or refused."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from grid.report import breakeven
from tests.grid.analysis.test_breakeven import _cell, surface


def _data(accept: dict[str, float]):
    stats, cells = surface()
    cells["accept_length_decode"] = cells.cell_id.map(accept)
    cells = pd.concat([cells, pd.DataFrame([_cell("u1", "eagle3", 1, 130.0)])],
                      ignore_index=True)
    requests = pd.DataFrame([{"cell_id": "u1", "workload": "coding", "status": "ok",
                              "domain": "coding", "output_tokens": 61,
                              "spec_verify_ct": 24}] * 4)
    return SimpleNamespace(cells=cells, stats=stats, requests=requests, baseline="baseline",
                           label="SIMULATION")


def test_the_section_is_labelled_and_flags_a_cell_the_engine_did_not_honour():
    honest = {f"f{c}-{a}": a for c in (1, 8) for a in (1.5, 2.5, 3.5)}
    data = _data({**honest, "f8-3.5": 2.8})  # forced 3.5, measured 2.8: -20 %
    text = breakeven.section(data)  # type: ignore[arg-type]
    assert text.startswith("break-even acceptance (forced acceptance: performance only, "
                           "SIMULATION)")
    assert "    c=1: 1.83 [1.67, 2.01]" in text
    # c=8 without its 3.5 cell: ratios 0.6 and 0.9 at 1.5 and 2.5 (x0.95 / x1.05 alike):
    # a* is past 2.5 in every replicate
    assert "    c=8: >= 2.50 (pays at no length measured) [2.50, >=2.50]" in text
    # 2.5 clears c=1's 1.83 and is at c=8's bound 2.5, which lost: does not pay there
    assert "drafter on coding: accept length 2.50 [2.50, 2.50] over 4 requests: pays up to " \
           "c=1 [c=1, c=1]\n" in text
    assert "honoured: 5 of 6 forced cells within ±10% of the forced length" in text
    assert ("FLAGGED eagle3__forced_len-3.5 c=8: forced 3.5, measured 2.80 (-20.0%: FLAGGED, "
            "beyond ±10%); left out of the curve") in text
    out = json.loads(json.dumps(breakeven.decision(data)))  # type: ignore[arg-type]
    assert out["label"] == "forced acceptance: performance only"
    assert [c["load"] for c in out["curves"]] == [1.0, 8.0]
    assert [h["honoured"] for h in out["honoured"]].count(False) == 1
    assert [h["in_curve"] for h in out["honoured"]].count(False) == 1
    assert out["curves"][1]["left_out"] == [
        "eagle3__forced_len-3.5 c=8: forced 3.5, measured 2.80 (-20.0%: FLAGGED, beyond ±10%)"]
    assert out["drafter"][0]["verdicts"][1] == {"load": 8.0, "verdict": "does not pay",
                                                "surely": "does not pay",
                                                "maybe": "does not pay"}
    assert out["drafter"][0]["pays_up_to"] == 1.0
    assert "FLAGGED" in breakeven.html_section(data)  # type: ignore[arg-type]
    assert breakeven.figure(data) is not None  # type: ignore[arg-type]


def test_a_run_without_forced_cells_has_no_section():
    data = _data({})
    data.cells = data.cells[data.cells.forced_acceptance.isna()]
    assert breakeven.section(data) == "" and breakeven.decision(data) == {}  # type: ignore[arg-type]
    assert breakeven.figure(data) is None  # type: ignore[arg-type]


def _ladder_data():
    from tests.grid.analysis.test_breakeven import ladder

    stats, cells = ladder()
    return SimpleNamespace(cells=cells, stats=stats, requests=pd.DataFrame(),
                           baseline="baseline", label="")


def test_a_ladder_reports_each_rungs_verdict_out_of_sample():
    data = _ladder_data()
    text = breakeven.section(data)  # type: ignore[arg-type]
    # tests/grid/analysis/test_breakeven.py: held out, c=1 agrees 1, no sign 1, unknown 1;
    # c=4 agrees 2, unknown 1
    assert ("      draft__draft-noise-0.00: accept length 4.60 [4.60, 4.60], x1.30 [1.24, 1.36]; "
            "without it the curve says pays: agrees with its speedup") in text
    assert ("      draft__draft-noise-0.35: accept length 1.40 [1.40, 1.40], x0.70 [0.67, 0.73]; "
            "without it the curve says unknown below 2.80: no verdict to compare") in text
    assert ("    held out (each rung's verdict by the curve without it): agrees with the "
            "measured speedup's sign at 3 of 3 rungs; 1 with no sign (interval holds 1), 2 "
            "beyond the other rungs' lengths (unknown)") in text
    out = json.loads(json.dumps(breakeven.decision(data)))  # type: ignore[arg-type]
    assert out["held_out"] == {"agree": 3, "disagree": 0, "no_sign": 1, "unknown": 2}
    assert out["refused"] == []
    # the run's answer, the sentence its report leads with: every load's break-even length
    lead = breakeven.answer(data)  # type: ignore[arg-type]
    assert lead is not None and lead.startswith(
        "break-even: the accept length draft must beat on coding: c=1 ")
    assert lead.count("c=") == len(out["curves"]) and lead.endswith("(a ladder of drafters)")


def test_a_ladder_of_two_shapes_is_refused_in_one_line(tmp_path):
    data = _ladder_data()
    for rung, layers in (("noise-0.00", 4), ("noise-0.20", 4), ("noise-0.35", 2)):
        (tmp_path / rung).mkdir()
        (tmp_path / rung / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    data.cells["server_args"] = [json.dumps({"speculative_draft_model_path": str(
        tmp_path / v.split("-", 1)[1])}) if "__draft-" in v else "{}" for v in data.cells.variant]
    text = breakeven.section(data)  # type: ignore[arg-type]
    assert text.startswith("break-even acceptance (drafter ladder, real acceptance)\n")
    assert ("  ladder draft not drawn: its rungs' draft models differ in shape "
            "(draft__draft-noise-0.00: num_hidden_layers=4") in text
    assert "held out" not in text
    out = breakeven.decision(data)  # type: ignore[arg-type]
    assert out["curves"] == [] and len(out["refused"]) == 1  # type: ignore[arg-type]
