"""The search's run loop (grid/execute/search.py) without Ray: a step whose cells do not commit
pauses the search with a note and exit 3 instead of asking for the same cells forever, and the
trace says where it stopped. The cells would run on the controller; here `run_cells` runs
nothing, as a controller whose cells all failed would leave it."""

from __future__ import annotations

import json

from grid.analysis import Slo
from grid.execute.search import EXIT_FAILED_CELLS, run_search
from grid.questions.steps import StuckSearch
from grid.run import make_plan
from grid.store.record import RunRecord

SMALL = ["+sweep=speculation", "grid.search.concurrency=[1,2]", "grid.search.depths=[0,1,2]",
         "grid.search.rates=[0.7]", "grid.search.forced=true"]
"""Loads 1 2, depths 1 2 forced to the chain of 0.7 (lengths 1.7 and 2.19), no length check;
depth 0 (no drafts) at both loads, the simulator runs it."""


def test_a_step_that_commits_nothing_pauses_the_search(tmp_path):
    planned = make_plan([*SMALL, f"results_dir={tmp_path}"])
    setup, run_dir = planned.search, planned.plan.run_dir
    assert setup is not None
    run_dir.mkdir(parents=True)
    record = RunRecord(run_dir, planned.plan.run_id)
    asked: list[list[str]] = []
    lines: list[str] = []

    def run_cells(cells):
        asked.append([c.describe() for c in cells])
        return 0  # nothing committed

    try:
        outcome = run_search(setup, run_dir, record, Slo(), run_cells, lines.append)
    finally:
        record.close()
    assert outcome.code == EXIT_FAILED_CELLS
    # Step 1 (the baseline, depth 0 and depths 1, 2 at c=1 and c=2, the drafter's own) is
    # asked once.
    assert len(asked) == 1 and len(asked[0]) == 9
    # in the step's order: the baseline, the rectangle, depth 0, the drafter's own
    note = ("search paused: cells at c=1 baseline, c=2 baseline, c=1 k=1 length 1.7, c=2 k=1 "
            "length 1.7, c=1 k=2 length 2.19, c=2 k=2 length 2.19, c=1 k=0 no drafts, c=2 k=0 "
            "no drafts, c=1 k=2 own acceptance did not complete; fix and run again")
    assert lines[-1] == note
    trace = json.loads((run_dir / "search.json").read_text())
    assert trace["kind"] == "speculation"
    assert trace["result"]["note"] == note and trace["result"]["stop"] is None


def test_a_question_that_cannot_go_on_ends_the_search_with_its_reason(tmp_path):
    planned = make_plan([*SMALL, f"results_dir={tmp_path}"])
    setup, run_dir = planned.search, planned.plan.run_dir
    assert setup is not None
    run_dir.mkdir(parents=True)

    def stuck(run_dir, slo):
        raise StuckSearch("search step 2 asks for no new point and does not stop: the "
                          "question cannot go on")

    setup.replay = stuck  # type: ignore[method-assign]  # a question with the fault
    record = RunRecord(run_dir, planned.plan.run_id)
    lines: list[str] = []
    try:
        outcome = run_search(setup, run_dir, record, Slo(), lambda cells: 0, lines.append)
    finally:
        record.close()
    assert outcome.code == EXIT_FAILED_CELLS
    assert lines == ["search stopped: search step 2 asks for no new point and does not stop: "
                     "the question cannot go on"]
