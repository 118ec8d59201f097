"""An adaptive search end to end on the simulator, through the real run loop (grid/run.py ->
grid/execute/search.py -> the controller -> Ray actors -> simulator processes -> Parquet):
the budget stops it and says so; the same command again measures nothing new and writes the
same trace; a larger budget continues the same search from the committed cells."""

from __future__ import annotations

import json
import sqlite3

import pytest

from grid.loader import load_cells
from grid.run import run

# ~75 s (three runs, six server starts): slow, as DEVELOPMENT.md asks of a test over ~20 s.
pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]
# c in [1, 4]: lattice 1 2 3 4, coarse levels 1 2 3 4, the first step measures c=1 and c=2
# (up to the geometric middle √(1 x 4) = 2): 4 cells, the whole budget of the first run.
SEARCH = ["+sweep=crossover_search", "grid.search.concurrency=[1,4]",
          "workload.max_new_tokens=16", "load.num_requests=8", "load.warmup_requests=1"]


def _servers(run_dir) -> int:
    with sqlite3.connect(run_dir / "_ledger.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM servers").fetchone()[0]


def test_search_stops_on_budget_resumes_and_continues(tmp_path):
    lines: list[str] = []
    first = run([*SEARCH, "grid.search.max_cells=4", f"results_dir={tmp_path}"],
                echo=lines.append)
    assert first.exit_code == 0, "\n".join(lines)
    run_dir = first.run_dir
    trace = json.loads((run_dir / "search.json").read_text())
    assert [s["points"] for s in trace["steps"]] == [[[1, 0], [2, 0]], []]
    assert trace["result"]["stop"] == "budget" and trace["result"]["cells"] == 4
    assert "search stopped: budget after 4 cells (budget 4)" in lines
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["search"]["steps"] == trace["steps"]
    cells = load_cells(run_dir)
    assert len(cells) == 4 and (cells.status == "done").all()
    assert sorted(cells.concurrency) == [1, 1, 2, 2]
    assert "search: crossover of eagle3 vs baseline on coding, 4 of 4 cells" in \
        (run_dir / "report.md").read_text()
    started = _servers(run_dir)

    # The same command again: nothing new is measured, the trace is the same.
    again = run([*SEARCH, "grid.search.max_cells=4", f"results_dir={tmp_path}"],
                echo=lambda _: None)
    assert again.exit_code == 0 and again.run_dir == run_dir
    assert _servers(run_dir) == started
    assert json.loads((run_dir / "search.json").read_text()) == trace

    # A larger budget continues the same search: step 1 is not measured again.
    more = run([*SEARCH, "grid.search.max_cells=6", f"results_dir={tmp_path}"],
               echo=lambda _: None)
    assert more.exit_code == 0
    longer = json.loads((run_dir / "search.json").read_text())
    assert longer["steps"][0] == trace["steps"][0]
    assert len(longer["steps"][1]["points"]) == 1  # one more point: 2 cells
    cells = load_cells(run_dir)
    assert len(cells) == 6 and (cells.attempt == 1).all()
    assert longer["result"]["cells"] == 6
