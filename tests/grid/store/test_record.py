"""The run record reconciles the ledger and the committed files both ways on every start
(real SQLite, real Parquet, no Ray)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import psutil

from grid.plan.cells import make_cell
from grid.plan.work import Bounds, PlannedCell
from grid.store.record import RunRecord
from grid.store.results import write_cell
from grid.store.rows import ServerFacts, failed
from tests.grid.plan.test_cells import _config


def _cells():
    return [make_cell({"concurrency": c}, _config(concurrency=c), "d") for c in (1, 4)]


def _outcome(record, cell, attempt, status="done"):
    work = PlannedCell(cell, (), "requests", cell.num_requests, Bounds(1.0, 0.0, None),
                    "SIMULATION")
    outcome = failed(record.run_id, work, attempt, started=1.0, finished=2.0, error="x",
                     log_tail=None, server=ServerFacts())
    outcome.status = outcome.row["status"] = status
    outcome.error = outcome.row["error"] = None if status == "done" else "boom"
    outcome.requests = [{"run_id": record.run_id, "cell_id": cell.cell_id, "attempt": attempt,
                         "request_id": "q0", "status": "ok"}]
    return outcome


def _recover(run_dir, cells):
    lines: list[str] = []
    record = RunRecord(run_dir, "r")
    record.recover(cells, lines.append)
    return record, lines


def test_done_in_ledger_but_files_missing_runs_again(tmp_path):
    a, b = _cells()
    record, _ = _recover(tmp_path, [a, b])
    for cell in (a, b):
        record.commit(cell, record.start_attempt(cell), _outcome(record, cell, 1))
    record.close()
    for lost in (tmp_path / "cells").rglob(f"{a.cell_id}.a1.parquet"):
        lost.unlink()  # a's commit is gone

    record, lines = _recover(tmp_path, [a, b])
    assert record.status(a.cell_id) == "pending"
    assert record.status(b.cell_id) == "done"
    assert any(a.cell_id in line and "missing" in line for line in lines)
    assert record.start_attempt(a) == 2  # attempt numbers never reuse a file's
    record.close()


def test_files_committed_but_ledger_behind_is_done(tmp_path):
    a, b = _cells()
    record, _ = _recover(tmp_path, [a, b])
    attempt = record.start_attempt(a)
    # The driver dies after the commit's rename and before the ledger write.
    outcome = _outcome(record, a, attempt)
    write_cell(tmp_path, variant=a.variant, workload=a.workload, cell_id=a.cell_id,
               attempt=attempt, requests=outcome.requests, cell_row=outcome.row)
    record.close()

    record, lines = _recover(tmp_path, [a, b])
    assert record.status(a.cell_id) == "done"
    assert record.status(b.cell_id) == "pending"
    assert any(a.cell_id in line and "committed attempt 1 is done" in line for line in lines)
    record.close()


def test_lost_ledger_is_rebuilt_from_the_files(tmp_path):
    a, b = _cells()
    record, _ = _recover(tmp_path, [a, b])
    record.commit(a, record.start_attempt(a), _outcome(record, a, 1, "failed"))
    record.commit(a, record.start_attempt(a), _outcome(record, a, 2, "done"))
    record.commit(b, record.start_attempt(b), _outcome(record, b, 1, "failed"))
    record.close()
    (tmp_path / "_ledger.sqlite").unlink()
    for extra in tmp_path.glob("_ledger.sqlite-*"):
        extra.unlink()

    record, _ = _recover(tmp_path, [a, b])
    rows = {r["cell_id"]: r for r in record.ledger.rows()}
    assert (rows[a.cell_id]["status"], rows[a.cell_id]["attempts"]) == ("done", 2)
    assert (rows[b.cell_id]["status"], rows[b.cell_id]["attempts"]) == ("failed", 1)
    assert rows[b.cell_id]["error"] == "boom"
    record.close()


def test_interrupted_newer_attempt_keeps_its_status(tmp_path):
    """Attempt 1 failed and was committed; attempt 2 was running when the driver died: the
    ledger knows more than the files, so the cell is interrupted (it runs again)."""
    a, b = _cells()
    record, _ = _recover(tmp_path, [a, b])
    record.commit(a, record.start_attempt(a), _outcome(record, a, 1, "failed"))
    record.start_attempt(a)
    record.close()
    record, _ = _recover(tmp_path, [a, b])
    assert record.status(a.cell_id) == "interrupted"
    record.close()


def test_recover_kills_a_server_left_by_a_killed_driver(tmp_path):
    """The kill path itself: a process in its own session (as servers are started), recorded
    in the ledger and never stopped, is killed by the next start."""
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                start_new_session=True)
    try:
        record, _ = _recover(tmp_path, _cells())
        record.server_started("key", leftover.pid, leftover.pid, socket.gethostname(),
                              psutil.Process(leftover.pid).create_time())
        record.close()
        record, lines = _recover(tmp_path, _cells())
        assert leftover.wait(timeout=10) is not None
        assert f"killed server pid {leftover.pid} left behind by an earlier driver" in lines
        assert record.ledger.unstopped_servers() == []
        record.close()
    finally:
        if leftover.poll() is None:
            leftover.kill()


def test_recover_leaves_an_unrelated_process_with_a_reused_pid(tmp_path):
    """A recorded pid now held by a process that does not lead that process group (a reused
    pid) is not killed."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        record, _ = _recover(tmp_path, _cells())
        record.server_started("key", other.pid, other.pid)  # other's group is ours, not its pid
        record.close()
        record, lines = _recover(tmp_path, _cells())
        time.sleep(0.2)
        assert psutil.Process(other.pid).is_running() and other.poll() is None
        assert not any("killed" in line for line in lines)
        record.close()
    finally:
        other.kill()
        other.wait()


def test_recover_leaves_a_process_whose_start_time_differs(tmp_path):
    """A process that leads its own group under the recorded pid but started at another time
    than recorded is not the server: it is left alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
    try:
        started = psutil.Process(other.pid).create_time()
        record, _ = _recover(tmp_path, _cells())
        record.server_started("key", other.pid, other.pid, socket.gethostname(), started - 60)
        record.close()
        record, lines = _recover(tmp_path, _cells())
        time.sleep(0.2)
        assert other.poll() is None and not any("killed" in line for line in lines)
        assert record.ledger.unstopped_servers() == []
        record.close()
    finally:
        other.kill()
        other.wait()
