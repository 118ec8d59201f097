from __future__ import annotations

import pytest

from grid.plan.cells import make_cell
from grid.store.ledger import DriverLock, Ledger, RunLockedError, Status, StatusError
from tests.grid.plan.test_cells import _config


def _cells():
    return [make_cell({"concurrency": c}, _config(concurrency=c), "d") for c in (1, 4)]


def test_status_attempts_and_counts(tmp_path):
    ledger = Ledger(tmp_path)
    a, b = _cells()
    ledger.add_cells([a, b])
    assert ledger.status(a.cell_id) == "pending"
    assert ledger.start_attempt(a.cell_id) == 1
    ledger.finish(a.cell_id, "failed", "boom", "log tail")
    assert ledger.start_attempt(a.cell_id) == 2
    ledger.finish(a.cell_id, "done")
    ledger.add_cells([a, b])  # re-adding keeps status
    assert ledger.status(a.cell_id) == "done"
    assert ledger.counts() == {"pending": 1, "running": 0, "done": 1, "failed": 0,
                               "interrupted": 0}
    ledger.close()


def test_a_status_moves_only_as_a_run_moves_it(tmp_path):
    ledger = Ledger(tmp_path)
    a, b = _cells()
    ledger.add_cells([a, b])
    with pytest.raises(StatusError, match="pending cannot become done"):
        ledger.finish(a.cell_id, Status.DONE)  # never started
    ledger.start_attempt(a.cell_id)
    with pytest.raises(StatusError, match="running cannot become running"):
        ledger.start_attempt(a.cell_id)  # already running
    ledger.finish(a.cell_id, Status.DONE)
    with pytest.raises(StatusError, match="done cannot become running"):
        ledger.start_attempt(a.cell_id)  # a done cell is never measured again
    with pytest.raises(StatusError, match="done cannot become failed"):
        ledger.finish(a.cell_id, Status.FAILED)
    assert ledger.rows([a.cell_id])[0]["attempts"] == 1
    ledger.follow_files(a.cell_id, Status.PENDING, 1, "results missing")  # files: the truth
    assert ledger.start_attempt(a.cell_id) == 2
    ledger.close()


def test_running_cells_of_a_dead_driver_become_interrupted(tmp_path):
    ledger = Ledger(tmp_path)
    a, b = _cells()
    ledger.add_cells([a, b])
    ledger.start_attempt(a.cell_id)
    ledger.close()
    again = Ledger(tmp_path)
    assert again.mark_running_interrupted("driver died") == 1
    assert again.status(a.cell_id) == "interrupted"
    assert again.rows([a.cell_id])[0]["error"] == "driver died"


def test_servers_recorded_until_stopped(tmp_path):
    ledger = Ledger(tmp_path)
    sid = ledger.server_started("key", 1234, 1234, "node-a", 1700000000.25)
    assert ledger.unstopped_servers() == [(sid, 1234, 1234, "node-a", 1700000000.25)]
    ledger.server_stopped(sid)
    assert ledger.unstopped_servers() == []


def test_second_driver_on_the_same_run_is_refused(tmp_path):
    with DriverLock(tmp_path):
        with pytest.raises(RunLockedError, match="another specgrid driver"):
            with DriverLock(tmp_path):
                pass
    with DriverLock(tmp_path):  # released when the first one ends
        pass
