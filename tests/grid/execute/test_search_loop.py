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


def test_a_step_that_commits_nothing_pauses_the_search(tmp_path):
    planned = make_plan(["+sweep=crossover_search", "grid.search.concurrency=[1,4]",
                         f"results_dir={tmp_path}"])
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
    # Step 1 (c=1 and c=2, both variants) is asked for once, not again.
    assert asked == [["baseline c=1 coding", "baseline c=2 coding", "eagle3 c=1 coding",
                      "eagle3 c=2 coding"]]
    note = "search paused: cells at c=1, c=2 did not complete; fix and run again"
    assert lines[-1] == note
    trace = json.loads((run_dir / "search.json").read_text())
    assert trace["result"]["note"] == note and trace["result"]["stop"] is None


def test_a_depth_search_step_that_commits_nothing_pauses_it_too(tmp_path):
    planned = make_plan(["+sweep=depth_search", "grid.search.concurrency=[1,2]",
                         "grid.search.depths=[0,3]", "grid.search.max_repeats=1",
                         f"results_dir={tmp_path}"])
    setup, run_dir = planned.search, planned.plan.run_dir
    assert setup is not None
    run_dir.mkdir(parents=True)
    record = RunRecord(run_dir, planned.plan.run_id)
    asked: list[list[str]] = []
    lines: list[str] = []
    try:
        outcome = run_search(setup, run_dir, record, Slo(),
                             lambda cells: asked.append([c.describe() for c in cells]) or 0,
                             lines.append)
    finally:
        record.close()
    assert outcome.code == EXIT_FAILED_CELLS
    # Step 1: both levels (c=1, 2 are the lattice and its coarse levels) at both depths, the
    # baseline's server first, each server's cells in ascending load; asked for once.
    assert asked == [["baseline c=1 coding", "baseline c=2 coding",
                      "eagle3__speculative_num_steps-3 c=1 coding",
                      "eagle3__speculative_num_steps-3 c=2 coding"]]
    assert lines[-1] == ("search paused: cells at c=1 baseline, c=1 depth 3, c=2 baseline, "
                         "c=2 depth 3 did not complete; fix and run again")
    trace = json.loads((run_dir / "search.json").read_text())
    assert trace["kind"] == "depth" and trace["result"]["stop"] is None


def test_a_breakeven_search_step_that_commits_nothing_pauses_it_too(tmp_path):
    planned = make_plan(["variant=baseline,eagle3", "grid.search.kind=breakeven",
                         "grid.search.concurrency=[1,2]", "grid.search.lengths=[1.5,3.5]",
                         f"results_dir={tmp_path}"])
    setup, run_dir = planned.search, planned.plan.run_dir
    assert setup is not None
    run_dir.mkdir(parents=True)
    record = RunRecord(run_dir, planned.plan.run_id)
    asked: list[list[str]] = []
    lines: list[str] = []
    try:
        outcome = run_search(setup, run_dir, record, Slo(),
                             lambda cells: asked.append([c.describe() for c in cells]) or 0,
                             lines.append)
    finally:
        record.close()
    assert outcome.code == EXIT_FAILED_CELLS
    # step 1: the lowest load's baseline and the lengths' two ends, asked for once
    label = "[forced acceptance: performance only]"
    assert asked == [["baseline c=1 coding", f"eagle3__forced_len-1.5 c=1 coding {label}",
                      f"eagle3__forced_len-3.5 c=1 coding {label}"]]
    trace = json.loads((run_dir / "search.json").read_text())
    assert trace["kind"] == "breakeven" and trace["lengths"] == [1.5, 3.5]
    assert trace["result"]["note"].startswith("search paused: cells at c=1 baseline, c=1 "
                                              "length 1.5, c=1 length 3.5 did not complete")


def test_a_question_that_cannot_go_on_ends_the_search_with_its_reason(tmp_path):
    planned = make_plan(["+sweep=crossover_search", "grid.search.concurrency=[1,4]",
                         f"results_dir={tmp_path}"])
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
