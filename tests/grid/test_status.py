from __future__ import annotations

import json
import subprocess
import sys

from grid.plan.cells import make_cell
from grid.status import format_status
from grid.store.ledger import Ledger
from tests.grid.plan.test_cells import _config


def test_status_lists_cells_with_errors_and_resume_hint(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"overrides": ["+sweep=smoke"]}))
    ledger = Ledger(tmp_path)
    done, failed, pending = (make_cell({"concurrency": c}, _config(concurrency=c), "d")
                             for c in (1, 4, 16))
    ledger.add_cells([done, failed, pending])
    ledger.start_attempt(done.cell_id)
    ledger.finish(done.cell_id, "done")
    ledger.start_attempt(failed.cell_id)
    ledger.finish(failed.cell_id, "failed", "server exited with code 1 during the cell\ntail")
    ledger.close()
    text = format_status(tmp_path)
    assert "done (1)" in text and "failed (1)" in text and "pending (1)" in text
    assert "error: server exited with code 1 during the cell" in text
    assert ("2 cell(s) not done; resume with: "
            f"python -m grid.run --resume {tmp_path.resolve()}") in text


def test_status_without_a_run_record_says_so(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.add_cells([make_cell({"concurrency": 1}, _config(concurrency=1), "d")])
    ledger.close()
    text = format_status(tmp_path)
    assert "1 cell(s) not done; this folder has no run.json" in text
    assert "--resume" not in text


def test_status_of_a_folder_that_is_no_run(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "grid.status", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "is not a run folder" in proc.stderr


def test_status_usage_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "grid.status", "a", "b"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == (
        "specgrid: error: usage: python -m grid.status RESULTS/RUN_ID [--verify]\n")
