"""The run folder's measured cells as the plan's estimate reads them (grid/store/measured.py)."""

from __future__ import annotations

import math

from grid.plan.estimate import Measured
from grid.store.measured import measured_cells
from grid.store.results import write_cell


def _commit(run_dir, cell_id: str, status: str, **cell) -> None:
    write_cell(run_dir, variant="baseline", workload="coding", cell_id=cell_id, attempt=1,
               requests=[], server_metrics=[],
               cell_row={"run_id": "r", "cell_id": cell_id, "attempt": 1, "status": status,
                         "server_key": "s1", **cell})


def test_done_cells_with_a_measured_window_are_read(tmp_path):
    _commit(tmp_path, "closed", "done", concurrency=4, num_requests=24, duration_s=12.5)
    _commit(tmp_path, "open", "done", rate=2.0, num_requests=10, duration_s=5.0)
    _commit(tmp_path, "failed", "failed", concurrency=1, num_requests=6, duration_s=math.nan)
    _commit(tmp_path, "unmeasured", "done", concurrency=1, num_requests=6)  # no window
    assert measured_cells(tmp_path) == {
        "closed": Measured("s1", concurrency=4, rate=None, requests=24, seconds=12.5),
        "open": Measured("s1", concurrency=None, rate=2.0, requests=10, seconds=5.0)}


def test_a_folder_that_does_not_exist_has_nothing_measured(tmp_path):
    assert measured_cells(tmp_path / "no-such-run") == {}


def test_earlier_runs_beside_it_are_read_too_keyed_by_their_run(tmp_path):
    this, earlier, other = tmp_path / "this", tmp_path / "earlier", tmp_path / "notes"
    _commit(this, "c4", "done", concurrency=4, num_requests=24, duration_s=12.5)
    _commit(earlier, "c8", "done", concurrency=8, num_requests=48, duration_s=20.0)
    other.mkdir()  # a folder without cells is no run: nothing read from it
    assert measured_cells(this, tmp_path) == {
        "c4": Measured("s1", concurrency=4, rate=None, requests=24, seconds=12.5),
        "earlier/c8": Measured("s1", concurrency=8, rate=None, requests=48, seconds=20.0)}
    # without the results folder only the run's own cells
    assert list(measured_cells(this)) == ["c4"]


def test_only_the_newest_earlier_runs_are_read(tmp_path):
    import os

    from grid.store import measured

    for i in range(measured.EARLIER_RUNS + 2):
        run = tmp_path / f"run{i:02d}"
        _commit(run, "c", "done", concurrency=1, num_requests=4, duration_s=1.0)
        os.utime(run, (1_000_000 + i, 1_000_000 + i))
    got = measured_cells(tmp_path / "run00", tmp_path)
    # run00's own cell, and the EARLIER_RUNS newest of the others: run01 is the oldest left out
    assert "c" in got and "run01/c" not in got
    assert len(got) == 1 + measured.EARLIER_RUNS
