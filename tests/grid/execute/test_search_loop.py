"""The search's run loop (grid/execute/search.py) without Ray: a step whose cells do not commit
pauses the search with a note and exit 3 instead of asking for the same cells forever, and the
trace says where it stopped. The cells would run on the controller; here `run_cells` runs
nothing, as a controller whose cells all failed would leave it."""

from __future__ import annotations

import json

from grid.analysis import Slo
from grid.execute.search import EXIT_FAILED_CELLS, run_search
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
