"""The results store and its loader: atomic attempt commits, a kill at any point of a commit,
superseded attempts, reconciliation of half-done commits."""

from __future__ import annotations

import errno
import os

import pandas as pd
import pytest

from grid.loader import load_cells, load_requests, load_server_metrics
from grid.store import files, results
from grid.store.results import ResultsWriteError, write_cell


def _request(i: int, **extra):
    row = {"run_id": "r", "cell_id": "c1", "request_id": f"q{i}", "status": "ok",
           "output_tokens": 16, "ttft_s": 0.01 * i, "itl_s": [0.01, 0.02]}
    row.update(extra)
    return row


def _commit(run_dir, cell_id="c1", attempt=1, n=3, variant="eagle3", status="done", **cell):
    write_cell(run_dir, variant=variant, workload="coding", cell_id=cell_id, attempt=attempt,
               requests=[_request(i, cell_id=cell_id, attempt=attempt) for i in range(n)],
               cell_row={"run_id": "r", "cell_id": cell_id, "attempt": attempt,
                         "status": status, **cell},
               server_metrics=[{"run_id": "r", "cell_id": cell_id, "attempt": attempt,
                                "metric": "m", "value": float(attempt)}])


def test_pandas_reads_the_partitioned_dataset(tmp_path):
    _commit(tmp_path)
    df = pd.read_parquet(tmp_path / "requests")
    assert len(df) == 3 and set(df.variant.astype(str)) == {"eagle3"}


def test_rerun_supersedes_the_earlier_attempt(tmp_path):
    _commit(tmp_path, attempt=1, n=3, status="failed")
    _commit(tmp_path, attempt=2, n=5)
    requests = load_requests(tmp_path)
    assert len(requests) == 5 and set(requests.attempt) == {2}
    assert load_cells(tmp_path).attempt.tolist() == [2]
    assert load_server_metrics(tmp_path).value.tolist() == [2.0]
    # A plain pandas read sees only the latest attempt too.
    assert set(pd.read_parquet(tmp_path / "requests").attempt) == {2}
    assert set(pd.read_parquet(tmp_path / "cells").attempt) == {2}
    # Every committed attempt stays readable on request.
    everything = load_requests(tmp_path, attempts="all")
    assert everything.groupby("attempt").size().to_dict() == {1: 3, 2: 5}
    assert load_cells(tmp_path, attempts="all").status.tolist() == ["failed", "done"]


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
    def full_disk(table, where, **options):
        open(where, "wb").write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results.pq, "write_table", full_disk)
    with pytest.raises(ResultsWriteError, match="No space left"):
        _commit(tmp_path)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == []


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


# A commit does 4 renames into place (requests, server metrics, telemetry, cell row), then
# hides the earlier attempt's 4 files: a kill after k of those 8 renames, for every k (each is
# grid/store/files.py's one os.replace).
@pytest.mark.parametrize("renames_before_kill", range(8))
def test_kill_inside_a_commit_never_mixes_attempts(tmp_path, monkeypatch, renames_before_kill):
    _commit(tmp_path, attempt=1, n=3)
    real_replace = os.replace
    done = {"n": 0}

    def dies(src, dst):
        if done["n"] == renames_before_kill:
            raise Killed
        done["n"] += 1
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", dies)
    with pytest.raises(Killed):
        _commit(tmp_path, attempt=2, n=5)
    monkeypatch.setattr(files.os, "replace", real_replace)

    committed = renames_before_kill >= 4  # the cell row's rename is the commit
    expected = 2 if committed else 1
    assert set(load_requests(tmp_path).attempt) == {expected}
    assert len(load_requests(tmp_path)) == (5 if committed else 3)
    assert load_cells(tmp_path).attempt.tolist() == [expected]
    assert load_server_metrics(tmp_path).value.tolist() == [float(expected)]

    # The next start finishes the job: a plain read then shows exactly one attempt too.
    results.reconcile(tmp_path)
    for dataset in ("requests", "cells", "server_metrics"):
        assert set(pd.read_parquet(tmp_path / dataset).attempt) == {expected}, dataset
    assert not list(tmp_path.rglob(".*.tmp"))
    assert results.committed_attempts(tmp_path) == {"c1": [1, 2] if committed else [1]}


def test_reconcile_removes_an_uncommitted_first_attempt(tmp_path, monkeypatch):
    real_replace = os.replace

    def dies_at_commit(src, dst):
        if "cells" in str(dst):
            raise Killed
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", dies_at_commit)
    with pytest.raises(Killed):
        _commit(tmp_path, attempt=1)
    monkeypatch.setattr(files.os, "replace", real_replace)
    assert load_requests(tmp_path).empty  # data without its cell row is never read
    notes = results.reconcile(tmp_path)
    assert any("uncommitted attempt 1 of cell c1" in n for n in notes)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
