"""The adaptive search in the report (grid/questions `traced`): each step with why it was taken,
the stop and its meaning, in the text summary, report.html and decision.json; a run without a
search shows none."""

from __future__ import annotations

import json

from grid.report import write_report
from tests.grid.analysis.synthetic import write_run

SPEEDS = {"baseline": {1: 100.0, 4: 90.0, 16: 60.0}, "eagle3": {1: 180.0, 4: 100.0, 16: 40.0}}
TRACE = {
    "kind": "crossover", "baseline": "baseline", "variant": "eagle3", "workload": "coding",
    "load_kind": "concurrency",
    "result": {"stop": "bracketed", "stop_meaning": "the crossover is bracketed between "
               "neighbouring levels of the lattice", "bracket": [4, 6], "cells": 8,
               "max_cells": 16, "lattice": [1, 2, 3, 4, 6, 8, 11, 16], "coarse": [1, 2, 4, 8, 16],
               "max_repeats": 3, "note": None},
    "steps": [
        {"number": 1, "points": [[1, 0], [2, 0], [4, 0]], "why": "coarse levels up to the "
         "range's geometric middle: c=1, c=2, c=4", "stop": None, "bracket": [None, None],
         "cells_before": 0, "signs": {}},
        {"number": 2, "points": [[8, 0]], "why": "pays at every measured level up to c=4: "
         "climb to the next coarse level c=8", "stop": None, "bracket": [4, None],
         "cells_before": 6, "signs": {"1": "+", "2": "+", "4": "+"}},
        {"number": 3, "points": [[6, 0]], "why": "pays at c=4, stops paying at c=8: bisect at "
         "c=6", "stop": None, "bracket": [4, 8], "cells_before": 8,
         "signs": {"1": "+", "2": "+", "4": "+", "8": "-"}},
        {"number": 4, "points": [], "why": "pays at c=4, stops paying at c=6: neighbouring "
         "levels of the lattice", "stop": "bracketed", "bracket": [4, 6], "cells_before": 10,
         "signs": {"1": "+", "2": "+", "4": "+", "6": "-", "8": "-"}},
    ],
}


def test_report_shows_the_search_steps_and_the_stop(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, SPEEDS)
    (run_dir / "search.json").write_text(json.dumps(TRACE))
    report = write_report(run_dir)
    text = report.summary
    assert "search: crossover of eagle3 vs baseline on coding, 8 of 16 cells (lattice 1..16)" \
        in text
    assert ("  step 3: pays at c=4, stops paying at c=8: bisect at c=6 -> measures c=6"
            in text.splitlines())
    assert ("  stopped: bracketed (the crossover is bracketed between neighbouring levels of "
            "the lattice); crossover between c=4 and c=6") in text.splitlines()
    decision = json.loads(report.decision.read_text())
    assert decision["search"] == TRACE
    html = report.html.read_text()
    assert "<h2>Adaptive search</h2>" in html
    assert "<li>step 4: pays at c=4, stops paying at c=6: neighbouring levels of the lattice" \
        in html


def test_a_run_without_a_search_shows_none(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, SPEEDS)
    report = write_report(run_dir)
    assert "search:" not in report.summary
    assert "search" not in json.loads(report.decision.read_text())
    assert "Adaptive search" not in report.html.read_text()


def test_a_threshold_search_replaces_the_crossover_rule(tmp_path):
    # The same cells, with a threshold search's confirmation after step 4: candidates 5 and
    # 6 (between the bracket's 4 and 6), measured at c=6 with the higher one winning. The
    # crossover rule reads only the tested levels (4, below the interpolated crossover); the
    # report and decision.json take the search's confirmed 6, and keep the rule's value.
    trace = json.loads(json.dumps(TRACE))
    trace["kind"] = "threshold"
    trace["steps"].append(
        {"number": 5, "points": [[5, 6, 0]], "why": "top candidates by predicted regret 5 "
         "(0.010), 6 (0.020): measure off_above=5 vs 6 at c=6", "stop": None,
         "candidates": [], "threshold": 5, "cells_before": 10, "signs": {},
         "phase": "confirm"})
    trace["steps"].append(
        {"number": 6, "points": [], "why": "top candidates 5 (0.010), 6 (0.020): every pair "
         "decided, set speculative_disable_above_batch=6", "stop": "confirmed",
         "candidates": [], "threshold": 6, "cells_before": 12, "signs": {"5->6": "+"},
         "phase": "confirm"})
    trace["result"].update(threshold=6, threshold_stop="confirmed", cells=12,
                           threshold_stop_meaning="every pair of top-ranked thresholds was "
                           "measured where the two differ")
    run_dir = tmp_path / "run"
    write_run(run_dir, SPEEDS)
    (run_dir / "search.json").write_text(json.dumps(trace))
    report = write_report(run_dir)
    lines = report.summary.splitlines()
    assert ("  step 5: top candidates by predicted regret 5 (0.010), 6 (0.020): measure "
            "off_above=5 vs 6 at c=6 -> measures off_above=5 vs 6 at c=6") in lines
    assert ("  threshold: set speculative_disable_above_batch=6 (confirmed: every pair of "
            "top-ranked thresholds was measured where the two differ)") in lines
    # speedups 1.8, 1.11, 0.67 at c=1, 4, 16: the rule says 4, the largest tested below the
    # crossover (between 4 and 16)
    assert ("recommendation for eagle3 on coding: set speculative_disable_above_batch=6: the "
            "threshold search's choice (confirmed; 5 vs 6: higher wins); the crossover rule "
            "alone says 4") in lines
    rec = json.loads(report.decision.read_text())["recommendations"][0]
    assert rec["speculative_disable_above_batch"] == 6 and rec["crossover_rule"] == 4
    assert rec["source"] == "threshold search"
