"""The adaptive search in the report (grid/report/search.py): each step with why it was taken,
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
