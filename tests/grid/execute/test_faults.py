"""The fault matrix on the simulator's --sim-* flags, through real Ray, real server processes
and real Parquet: each fault ends as the documented cell status, the run goes on, and no
server process is left behind."""

from __future__ import annotations

import errno
import os
import sys

import pytest

from grid.loader import load_cells, load_requests
from grid.run import EXIT_BAD_INPUT, EXIT_FAILED_CELLS, run
from grid.store import results
from tests.grid.execute.smoke_runs import (
    SMOKE_BASELINE,
    assert_no_orphans,
    ledger_rows,
    run_smoke,
    served_starts,
)

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.mark.slow
def test_server_crash_mid_cell_fails_cell_and_relaunches(tmp_path):
    # 1 warmup + 6 measured requests per cell; the server dies when the 5th request arrives.
    outcome, out = run_smoke(tmp_path, "engine.options.crash_after_requests=4")
    assert outcome.exit_code == EXIT_FAILED_CELLS
    rows = ledger_rows(outcome.run_dir, "SELECT status, error, log_tail FROM cells")
    assert [r[0] for r in rows] == ["failed", "failed"]
    assert all("exited" in r[1] for r in rows) and all(r[2] for r in rows)
    assert len(served_starts(outcome.run_dir)) == 2  # relaunched
    requests = load_requests(outcome.run_dir)
    assert (requests.status == "ok").any() and (requests.status == "error").any()
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_server_never_ready_fails_its_cells_and_is_killed(tmp_path):
    outcome, out = run_smoke(tmp_path, "engine.options.startup_seconds=600",
                             "engine.ready_timeout_s=2", "run.max_server_starts=1")
    assert outcome.exit_code == EXIT_FAILED_CELLS
    errors = [r[0] for r in ledger_rows(outcome.run_dir, "SELECT error FROM cells")]
    assert "not ready after 2 s" in errors[0]
    assert errors[1].startswith("server did not start")
    assert len(ledger_rows(outcome.run_dir, "SELECT id FROM servers")) == 1  # max_server_starts=1
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_a_server_that_dies_at_start_says_why_in_the_cell_error(tmp_path):
    # An interpreter (engine.python) that dies at start with a traceback, which the plan
    # cannot know about: the server's own start-up error, as a broken environment on a node
    # gives it.
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -c "
                      "\"raise ValueError(\\\"could not convert string to float: 'abc'\\\")\"\n")
    python.chmod(0o755)
    outcome, _ = run_smoke(tmp_path, f"engine.python={python}", "run.max_server_starts=1")
    assert outcome.exit_code == EXIT_FAILED_CELLS
    errors = [r[0] for r in ledger_rows(outcome.run_dir, "SELECT error FROM cells")]
    assert errors[0].startswith("server exited with code 1 before it was ready: ")
    assert errors[0].endswith(" | ValueError: could not convert string to float: 'abc'")
    assert "\n" not in errors[0]  # one line, as every cell error
    # the group's next cell is not started again (max_server_starts=1) and says why
    assert errors[1].startswith("server did not start") and errors[1].endswith("'abc'")
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_http_errors_below_threshold_are_counted(tmp_path):
    outcome, _ = run_smoke(tmp_path, "engine.options.error_rate=0.3", "run.max_error_rate=0.9",
                           "load.num_requests=20")
    assert outcome.exit_code == 0
    cells = load_cells(outcome.run_dir)
    assert (cells.status == "done").all() and (cells.requests_error > 0).all()
    errors = load_requests(outcome.run_dir).query("status == 'error'")
    assert errors.error.str.contains("500").all()


@pytest.mark.slow
def test_http_errors_above_threshold_fail_the_cell(tmp_path):
    outcome, _ = run_smoke(tmp_path, "engine.options.error_rate=0.5", "run.max_error_rate=0.1",
                           "load.num_requests=20")
    assert outcome.exit_code == EXIT_FAILED_CELLS
    cells = load_cells(outcome.run_dir)
    assert (cells.status == "failed").all()
    assert cells.error.str.contains("error rate").all()


@pytest.mark.slow
def test_malformed_stream_is_an_error_row(tmp_path):
    outcome, _ = run_smoke(tmp_path, "engine.options.malformed_rate=0.5", "run.max_error_rate=1.0",
                           "load.num_requests=20")
    requests = load_requests(outcome.run_dir)
    bad = requests[requests.status == "error"]
    assert len(bad) > 0 and (requests.status == "ok").any()
    assert bad.error.str.contains("malformed|JSON|json|SSE", regex=True).all()


@pytest.mark.slow
def test_hung_server_times_out_requests(tmp_path):
    outcome, _ = run_smoke(tmp_path, "engine.options.hang_after_requests=3",
                           "grid.axes.concurrency=[2]", "load.request_timeout_s=1",
                           "run.max_error_rate=1.0")
    requests = load_requests(outcome.run_dir)
    errors = requests[requests.status == "error"]
    assert len(errors) >= 3
    assert errors.error.str.contains("timeout|timed out", case=False, regex=True).all()
    assert_no_orphans(outcome.run_dir)


def test_unwritable_results_folder_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    outcome = run([*SMOKE_BASELINE, f"results_dir={blocker}/results"], echo=lambda line: None)
    assert outcome.exit_code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not writable" in err[0]


@pytest.mark.slow
def test_disk_full_mid_run_commits_nothing_half_way_then_resumes(tmp_path, monkeypatch):
    real_write = results.pq.write_table
    calls = {"n": 0}

    def fills_up(table, where, **kw):
        calls["n"] += 1
        # the first cell writes telemetry, requests, server metrics, its row; then the second
        if calls["n"] == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(table, where, **kw)

    monkeypatch.setattr(results.pq, "write_table", fills_up)
    outcome, _ = run_smoke(tmp_path)
    assert outcome.exit_code == EXIT_BAD_INPUT
    run_dir = tmp_path / os.listdir(tmp_path)[0]
    statuses = sorted(r[0] for r in ledger_rows(run_dir, "SELECT status FROM cells"))
    assert statuses == ["done", "interrupted"]
    assert load_requests(run_dir).cell_id.nunique() == 1
    assert not [p for p in run_dir.rglob(".*.tmp")]
    assert_no_orphans(run_dir)
    monkeypatch.setattr(results.pq, "write_table", real_write)
    again, _ = run_smoke(tmp_path)
    assert again.exit_code == 0 and again.counts["done"] == 2
    assert len(load_requests(run_dir)) == 12
