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
