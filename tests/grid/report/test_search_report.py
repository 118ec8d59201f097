"""A question in the report (grid/questions `traced`): its lines in the text summary, its
section in report.html, its trace in decision.json; a run without a question shows none."""

from __future__ import annotations

import json

from grid.report import write_report
from tests.grid.analysis.synthetic import write_run
from tests.grid.questions.speculation.test_report import TRACE

SPEEDS = {"baseline": {1: 100.0, 4: 90.0, 16: 60.0}, "eagle3": {1: 180.0, 4: 100.0, 16: 40.0}}


def test_report_shows_the_questions_lines_section_and_trace(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, SPEEDS)
    (run_dir / "search.json").write_text(json.dumps(TRACE))
    report = write_report(run_dir)
    assert "search: speculation of eagle3 vs baseline on coding" in report.summary
    assert "  stopped: fits (every cell agrees)" in report.summary.splitlines()
    assert json.loads(report.decision.read_text())["search"] == TRACE
    assert "<h2>Speculation</h2>" in report.html.read_text()
    # one recommendation: the question's, none of the dense rule's over the same cells beside it
    assert json.loads(report.decision.read_text())["recommendations"] == []
    assert report.summary.startswith("eagle3 on coding: for coding/x: set "
                                     "speculative_disable_above_batch=8")


def test_a_run_without_a_search_shows_none(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, SPEEDS)
    report = write_report(run_dir)
    assert "search:" not in report.summary
    assert "search" not in json.loads(report.decision.read_text())
    assert "Adaptive search" not in report.html.read_text()
