from __future__ import annotations

import errno
import os

import pandas as pd
import pytest

from grid import results
from grid.loader import load_cells, load_requests
from grid.results import ResultsWriteError, write_cell


def _request(i: int, **extra):
    row = {"run_id": "r", "cell_id": "c1", "request_id": f"q{i}", "status": "ok",
           "output_tokens": 16, "ttft_s": 0.01 * i, "itl_s": [0.01, 0.02]}
    row.update(extra)
    return row


def _commit(run_dir, cell_id="c1", attempt=1, n=3, variant="eagle3", **cell):
    write_cell(run_dir, variant=variant, workload="coding", cell_id=cell_id, attempt=attempt,
               requests=[_request(i, cell_id=cell_id) for i in range(n)],
               cell_row={"run_id": "r", "cell_id": cell_id, "attempt": attempt,
                         "status": "done", **cell})


def test_pandas_reads_the_partitioned_dataset(tmp_path):
    _commit(tmp_path)
    df = pd.read_parquet(tmp_path / "requests")
    assert len(df) == 3 and set(df.variant.astype(str)) == {"eagle3"}


def test_rerun_replaces_instead_of_duplicating(tmp_path):
    _commit(tmp_path, attempt=1, n=3)
    _commit(tmp_path, attempt=2, n=5)
    requests = load_requests(tmp_path)
    assert len(requests) == 5
    assert len(load_cells(tmp_path, latest=False)) == 2  # one row per attempt
    assert load_cells(tmp_path).attempt.tolist() == [2]


def test_loader_keeps_columns_missing_from_some_files(tmp_path):
    _commit(tmp_path, cell_id="a", variant="baseline")  # no accept_length values anywhere
    _commit(tmp_path, cell_id="b", accept_length=2.5, variant="eagle3")
    cells = load_cells(tmp_path)
    assert "accept_length" in cells.columns and "server_info" in cells.columns
    assert cells.set_index("cell_id").accept_length.isna().to_dict() == {"a": True, "b": False}
    assert str(load_requests(tmp_path).variant.dtype) in ("object", "string", "str")


def test_loader_on_a_missing_dataset_gives_empty_frame_with_columns(tmp_path):
    df = load_requests(tmp_path)
    assert df.empty and "ttft_s" in df.columns


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    def full_disk(table, where):
        open(where, "wb").write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results.pq, "write_table", full_disk)
    with pytest.raises(ResultsWriteError, match="No space left"):
        _commit(tmp_path)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == []
