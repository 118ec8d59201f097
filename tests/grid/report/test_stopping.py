"""The report's validity lines about how cells stopped (grid/report/stopping.py)."""

from __future__ import annotations

import pandas as pd

from grid.report.stopping import stop_findings
from grid.store.stopping import WIDER


def test_over_saturated_and_capped_cells_are_named():
    cells = pd.DataFrame([
        {"variant": "baseline", "concurrency": None, "rate": 15.0, "status": "done",
         "stop_reason": "over_saturated", "requests_ok": 200,
         "stop_detail": "over-saturated: backlog rising 7.5 requests/s"},
        {"variant": "eagle3", "concurrency": 1, "rate": None, "status": "done",
         "stop_reason": "cap", "requests_ok": 32,
         "stop_detail": "precision not reached: output_tok_s ±7.9 % after 32 requests"},
        {"variant": "eagle3", "concurrency": 8, "rate": None, "status": "done",
         "stop_reason": "target", "requests_ok": 40, "stop_detail": "output_tok_s ±4 %"},
        {"variant": "baseline", "concurrency": 8, "rate": None, "status": "done",
         "stop_reason": "target", "requests_ok": 24, "stop_detail": "output_tok_s ±3 %"},
        {"variant": "baseline", "concurrency": 2, "rate": None, "status": "done",
         "stop_reason": "target", "requests_ok": 90,
         "stop_detail": f"{WIDER} (its check met the target before the requests then in flight "
                        "finished): precision not reached: output_tok_s ±10.01 %"},
    ])
    lines = stop_findings(cells)
    assert [level for level, _ in lines] == ["warning", "warning", "warning", "note"]
    assert "over-saturated in 1 cell(s)" in lines[0][1]
    assert ("not a steady state, and no capacity is claimed at or beyond them: baseline 15/s: "
            "over-saturated: backlog rising") in lines[0][1]
    assert "precision target not reached in 1 cell(s)" in lines[1][1]
    assert "eagle3 c=1 (precision not reached: output_tok_s ±7.9 % after 32" in lines[1][1]
    assert lines[2][1] == ("1 cell(s) stopped at their precision target with an interval over "
                           "all their requests wider than it: baseline c=2 (its check met the "
                           "target before the requests then in flight finished): precision not "
                           "reached: output_tok_s ±10.01 %")
    assert lines[3][1] == "2 cell(s) stopped at their precision target, 64 requests in all"


def test_runs_without_stop_columns_have_no_findings():
    assert stop_findings(pd.DataFrame([{"variant": "b", "status": "done"}])) == []
    counted = pd.DataFrame([{"variant": "b", "concurrency": 1, "rate": None, "status": "done",
                             "stop_reason": "count", "stop_detail": "8 requests",
                             "requests_ok": 8}])
    assert stop_findings(counted) == []


def test_a_miss_within_the_goals_last_digit_is_a_note_not_a_warning():
    # ±5.2 % against ±5 %: rounds to 5, the goal's last printed digit: a note. ±5.6 % rounds to
    # 6: a warning. ±2.54 % against ±2.5 % rounds to 2.5: a note.
    def cell(c: int, width: float, goal: str) -> dict:
        return {"variant": "eagle3", "concurrency": c, "rate": None, "status": "done",
                "stop_reason": "target", "requests_ok": 40, "stop_half_width": width,
                "stop_detail": f"{WIDER} (its check met the target before the requests then in "
                               f"flight finished): precision not reached: output_tok_s "
                               f"±{100 * width:.2f} % after 40 requests (target ±{goal} %)"}
    lines = stop_findings(pd.DataFrame([cell(1, 0.052, "5"), cell(2, 0.056, "5"),
                                        cell(4, 0.0254, "2.5")]))
    assert [level for level, _ in lines] == ["warning", "note"]
    assert lines[0][1].startswith("1 cell(s) stopped at their precision target with an "
                                  "interval over all their requests wider than it: eagle3 c=2")
    assert lines[1][1].startswith(
        "2 cell(s) stopped at their precision target with an interval over all their requests "
        "wider than it by less than the target's last digit (the requests in flight at the "
        "stop, finished after it): eagle3 c=1 ")
    assert "eagle3 c=4 " in lines[1][1]
