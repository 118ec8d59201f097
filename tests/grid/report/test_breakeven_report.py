"""The report's break-even section (grid/report/breakeven.py) on the hand-worked surface of
tests/grid/analysis/test_breakeven.py: labelled, honoured or flagged, the drafter placed."""

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
                           label="SIMULATION", drafter_run=None, drafter_note="")


def test_the_section_is_labelled_and_flags_a_cell_the_engine_did_not_honour():
    honest = {f"f{c}-{a}": a for c in (1, 8) for a in (1.5, 2.5, 3.5)}
    data = _data({**honest, "f8-3.5": 2.8})  # forced 3.5, measured 2.8: -20 %
    text = breakeven.section(data)  # type: ignore[arg-type]
    assert text.startswith("break-even acceptance (forced acceptance: performance only, "
                           "SIMULATION)")
    assert "    c=1: 1.83 [1.67, 2.01]" in text and "    c=8: 3.00 [2.76, 3.26]" in text
    assert "drafter on coding: accept length 2.50 [2.50, 2.50] over 4 requests: pays up to " \
           "c=1 [c=1, c=1]" in text
    assert "honoured: 5 of 6 forced cells within ±10% of the forced length" in text
    assert "FLAGGED eagle3__forced_len-3.5 c=8: forced 3.5, measured 2.80 (-20.0%" in text
    out = json.loads(json.dumps(breakeven.decision(data)))  # type: ignore[arg-type]
    assert out["label"] == "forced acceptance: performance only"
    assert [c["load"] for c in out["curves"]] == [1.0, 8.0]
    assert [h["honoured"] for h in out["honoured"]].count(False) == 1
    assert out["drafter"][0]["pays_up_to"] == 1.0
    assert "FLAGGED" in breakeven.html_section(data)  # type: ignore[arg-type]
    assert breakeven.figure(data) is not None  # type: ignore[arg-type]


def test_a_run_without_forced_cells_has_no_section():
    data = _data({})
    data.cells = data.cells[data.cells.forced_acceptance.isna()]
    assert breakeven.section(data) == "" and breakeven.decision(data) == {}  # type: ignore[arg-type]
    assert breakeven.figure(data) is None  # type: ignore[arg-type]


def test_a_breakeven_searchs_trace_reads_as_its_steps_and_brackets():
    from grid.analysis.breakeven_search import chosen, replay
    from grid.report.search import trace_lines
    from tests.grid.analysis.test_breakeven_search import DENSE, LENGTHS, SPACE

    steps = replay(SPACE, DENSE)
    trace = {"kind": "breakeven", "variant": "eagle3", "baseline": "baseline",
             "workload": "coding", "loads": list(SPACE.loads), "lengths": list(LENGTHS),
             "result": {"stop": "resolved", "cells": len(chosen(steps)), "max_cells": 40,
                        "dense_cells": 32, "brackets": {str(k): v for k, v in
                                                        steps[-1].brackets.items()}},
             "steps": [s.as_json() for s in steps]}
    lines = trace_lines(trace)
    assert lines[0].startswith("search: break-even of eagle3 vs baseline on coding (forced "
                               "acceptance: performance only), 19 of 40 cells (the dense "
                               "grid: 32)")
    assert lines[1] == ("  step 1: c=1: the lengths' ends (1, 4) -> measures c=1 baseline, "
                        "c=1 length 1, c=1 length 4")
    assert lines[-1] == ("  stopped: resolved; break-even c=1 between 1.5 and 2; c=2 between "
                         "2 and 2.5; c=4 between 2.5 and 3; c=8 at or above 4")


def test_an_earlier_runs_drafter_is_placed_labelled_with_its_run():
    from grid.analysis.drafter_run import DrafterRun

    data = _data({f"f{c}-{a}": a for c in (1, 8) for a in (1.5, 2.5, 3.5)})
    # the earlier run's coding prompts: 3.2 [3.1, 3.3] over 40 requests: above a* at c=1
    # (1.83) and c=8 (3.00 [2.76, 3.26]); its lower end 3.1 is below c=8's upper end 3.26
    data.drafter_run = DrafterRun("old", {"eagle3": {"coding": (40, 3.2, 3.1, 3.3)}},
                                  "/results/old")
    text = breakeven.section(data)  # type: ignore[arg-type]
    assert ("    drafter on coding (run old): accept length 3.20 [3.10, 3.30] over 40 "
            "requests: pays up to c=8 [c=1, c=8]") in text
    # this run's own unforced cell is still placed, unlabelled
    assert "    drafter on coding: accept length 2.50 [2.50, 2.50] over 4 requests" in text
    out = json.loads(json.dumps(breakeven.decision(data)))  # type: ignore[arg-type]
    assert out["drafter_run"] == {"run": "old", "path": "/results/old"}
    assert [d["source_run"] for d in out["drafter"]] == [None, "old"]
    assert "coding (run old): accept length 3.20" in breakeven.html_section(data)  # type: ignore[arg-type]


def test_an_earlier_run_without_a_clear_configuration_is_said_not_placed():
    from grid.analysis.drafter_run import DrafterRun

    data = _data({})
    lengths = {"coding": (40, 3.2, 3.1, 3.3)}
    data.drafter_run = DrafterRun("old", {"eagle3a": lengths, "eagle3b": lengths}, "/x")
    text = breakeven.section(data)  # type: ignore[arg-type]
    assert ("  drafter run not placed: drafter run old has no configuration 'eagle3' and "
            "several others (eagle3a, eagle3b)") in text
    assert "(run old)" not in text
