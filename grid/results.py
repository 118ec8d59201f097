"""The results writer: each cell's rows become one Parquet file per dataset, written atomically
(hidden temp name in the target folder, then rename), so a reader never sees a partial file and
a re-run of a cell replaces its file instead of adding a second one. Only the driver writes."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grid.schema import CELL_FIELDS, REQUEST_FIELDS, SERVER_METRIC_FIELDS, TELEMETRY_FIELDS


class ResultsWriteError(OSError):
    """A results file could not be written; nothing was committed."""


def partition_dir(root: Path, dataset: str, variant: str, workload: str) -> Path:
    return root / dataset / f"variant={variant}" / f"workload={workload}"


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write `table` to `path` so that the file appears whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ResultsWriteError(f"cannot write {path}: {e.strerror or e}") from None


def request_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([dict(r) for r in rows], schema=REQUEST_FIELDS)


def cell_table(row: Mapping[str, Any]) -> pa.Table:
    return pa.Table.from_pylist([dict(row)], schema=CELL_FIELDS)


def write_cell(
    run_dir: Path,
    *,
    variant: str,
    workload: str,
    cell_id: str,
    attempt: int,
    requests: Sequence[Mapping[str, Any]],
    cell_row: Mapping[str, Any],
    server_metrics: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Commit one cell attempt: its requests and server metrics (replacing any earlier
    attempt's files), then its cell row (one file per attempt), which is written last.
    Tables are built before anything is written."""
    req = request_table(requests)
    cell = cell_table(cell_row)
    metrics = pa.Table.from_pylist([dict(r) for r in server_metrics],
                                   schema=SERVER_METRIC_FIELDS)
    write_atomic(req, partition_dir(run_dir, "requests", variant, workload) / f"{cell_id}.parquet")
    write_atomic(metrics, partition_dir(run_dir, "server_metrics", variant, workload)
                 / f"{cell_id}.parquet")
    write_atomic(cell, partition_dir(run_dir, "cells", variant, workload)
                 / f"{cell_id}.a{attempt}.parquet")


def write_telemetry(run_dir: Path, *, variant: str, workload: str, cell_id: str,
                    rows: Sequence[Mapping[str, Any]]) -> None:
    """A cell's GPU telemetry (telemetry/), replacing an earlier attempt's file. Written
    before the cell row, which commits the cell."""
    table = pa.Table.from_pylist([dict(r) for r in rows], schema=TELEMETRY_FIELDS)
    write_atomic(table, partition_dir(run_dir, "telemetry", variant, workload)
                 / f"{cell_id}.parquet")
