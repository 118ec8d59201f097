"""The plan of a question (grid/plan/search.py, grid/questions): bad input is one line and exit
2 before anything starts; `plan=true` shows the first step's cells and the budget and writes
nothing."""

from __future__ import annotations

import pytest

from grid.run import run
from tests.grid.plan.bad_input import assert_bad_input

SEARCH = ["+sweep=speculation"]
BAD = [
    (["grid.search.concurrency=[]"], "grid.search.concurrency must be [lowest, highest]"),
    (["grid.search.concurrency=[8,8]"], "1 <= lowest < highest, got [8, 8]"),
    (["grid.search.concurrency=[0,16]"], "1 <= lowest < highest, got [0, 16]"),
    (["grid.search.concurrency=[1,4,16]"], "got [1, 4, 16]"),
    (["grid.search.max_cells=1"], "grid.search.max_cells must be >= 2, got 1"),
    (["grid.search.resolution=1"], "grid.search.resolution must be > 1, got 1"),
    (["grid.search.kind=bisect"], "grid.search.kind='bisect' is not one of speculation, "
                                  "capacity"),
    # the retired searches' keys are no keys of the schema any more
    (["grid.search.candidates=3"], "Key 'candidates' not in 'SearchConfig'"),
    (["grid.search.depths=[1,2,3]"], "grid.search.depths must be ascending whole depths from 0"),
    (["grid.search.rates=[0.7,1.5]"], "grid.search.rates must be distinct forced acceptance "
                                      "rates in (0, 1]"),
    (["grid.search.profile=/no/such/profile.json"], "grid.search.profile=/no/such/profile.json"),
    (["grid.search.drafters=[/d/noise-0.1,/d/noise-0.1]"], "grid.search.drafters must be "
                                                            "distinct draft model paths"),
    (["grid.search.min_effect=2"], "grid.search.min_effect must be within [0, 1], got 2.0"),
    (["grid.search.confirm_cells=-1"], "grid.search.confirm_cells must be >= 0, got -1"),
    (["grid.search.repeat_spread=1.5"], "grid.search.repeat_spread must be a relative spread "
                                        "within [0, 1) (0.06: 6 % between repeats) or null, "
                                        "got 1.5"),
    (["load.concurrency=1,2"], "drop the grid axis concurrency"),
    (["+grid.axes.repeat=[0,1]"], "drop the grid axis repeat"),
    (["load.rate=5"], "searches closed-loop concurrency; unset load.rate"),
    (["grid.search.concurrency=[1,2]", "workload=coding,math"],
     "grid.search.kind=speculation measures one speculative variant with the baseline on one "
     "workload"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD)
def test_bad_search_is_one_line_before_anything_starts(overrides, message, tmp_path, capsys):
    assert_bad_input([*SEARCH, *overrides], message, tmp_path / "results", capsys)


def test_plan_shows_the_first_step_and_the_budget(tmp_path):
    lines: list[str] = []
    outcome = run([*SEARCH, "grid.search.concurrency=[1,4]", "grid.search.forced=true",
                   "plan=true", f"results_dir={tmp_path}"], echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0, text
    # [1, 4] in steps of 2: 1 2 4, every one coarse; depths 1..7: the coarse ones 1 4 7 (ends
    # and middle); the dense grid: 3 loads x (the baseline + 7 depths x 2 rates) = 45 cells on
    # 1 + 14 servers. Step 1: 3 baselines + 3 x 3 forced + the length check (depth 4, a=0.9)
    # at 1 2 4 + the drafter's own at depth 7, c=1 + depth 0 (the simulator runs it) at 1 2 4
    # = 19 cells on 7 servers.
    assert "lattice (3): 1 2 4; depths 1 2 3 4 5 6 7" in text
    assert ("the dense grid of these loads, depths and rates with the baseline: 45 cells, 15 "
            "server starts") in text
    assert ("step 1: coarse: loads 1 2 4 x depths 1 4 7 and the baseline; the length check at "
            "depth 4, a=0.9, loads 1 2 4; the drafter's own acceptance at depth 7, c=1; depth 0 "
            "(speculation configured, no drafts) at loads 1 2 4 -> 19 cells on 7 servers") in text
    assert len(outcome.cell_ids) == 19
    assert not any(tmp_path.iterdir())  # planning writes nothing

