"""A depth search end to end on the simulator, through the real run loop (grid/run.py ->
grid/execute/search.py -> the controller -> Ray actors -> simulator processes -> Parquet): the
search and its confirmation commit ordinary cells, the trace, decision.json and the setting
beside the report say the same schedule, and the same command again measures nothing new and
writes the same trace (nothing but the committed cells carries the search)."""

from __future__ import annotations

import json

import pytest

from grid.loader import load_cells
from grid.run import run
from tests.grid.execute.smoke_runs import served_starts

# ~4 min on the shared 2-core machine (five simulator starts: baseline, depths 1 and 3, the
# schedule and SGLang's adaptation): slow.
pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]
SEARCH = ["+sweep=depth_search", "grid.search.concurrency=[1,4]", "grid.search.depths=[0,1,3]",
          "grid.search.max_repeats=1", "hardware=h200", "model=llama3.1-8b",
          "workload.max_new_tokens=16", "load.num_requests=8", "load.warmup_requests=1",
          "grid.exclusive_node=false", "load.client_cpus=0.5"]


def test_depth_search_commits_its_cells_reports_the_setting_and_replays(tmp_path):
    lines: list[str] = []
    first = run([*SEARCH, f"results_dir={tmp_path}"], echo=lines.append)
    assert first.exit_code == 0, "\n".join(lines)
    run_dir = first.run_dir
    trace = json.loads((run_dir / "search.json").read_text())
    res = trace["result"]
    assert trace["kind"] == "depth" and res["stop"] == "resolved"
    assert res["confirm_stop"] in ("confirmed", "confirm_budget", "nothing_to_confirm")
    # Step 1: the coarse levels 1 2 4 at every depth (the set {0, 1, 3} is its own coarse set)
    assert sorted(map(tuple, trace["steps"][0]["points"])) == [
        (c, d, 0) for c in (1, 2, 4) for d in (0, 1, 3)]
    cells = load_cells(run_dir)
    assert (cells.status == "done").all() and len(cells) == res["cells"]
    schedule = res["schedule"]
    assert schedule[0][0] == 1 and all(d in (0, 1, 3) for _, d in schedule)
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["depth"]["schedule"] == schedule
    if res["setting"]:  # a schedule that drafts somewhere: SGLang's file beside the report
        (name, text), = res["setting"]["files"].items()
        assert (run_dir / "depth-schedule" / name).read_text() == text
        served = cells[cells.variant.str.contains("__depth-")]
        assert all(name in str(cmd) for cmd in served.server_command)
    assert "search: depth of eagle3 vs baseline on coding" in (run_dir / "report.md").read_text()

    starts = len(served_starts(run_dir))
    again = run([*SEARCH, f"results_dir={tmp_path}"], echo=lambda _: None)
    assert again.exit_code == 0 and again.run_dir == run_dir
    assert len(served_starts(run_dir)) == starts
    assert json.loads((run_dir / "search.json").read_text()) == trace
