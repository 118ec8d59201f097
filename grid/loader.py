"""Read a run's results with the explicit schema (pandas alone takes the schema from one file
and would drop columns missing there). Notebooks and the report read results through here.

Only committed attempts are ever read (an attempt is committed by its cell row, see
grid/results.py); by default only each cell's latest committed attempt, with attempts="all"
every committed one (failed and superseded attempts included)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from grid.results import attempt_files, committed_attempts, select
from grid.schema import (
    CELL_FIELDS,
    PARTITION_SCHEMA,
    REQUEST_FIELDS,
    SERVER_METRIC_FIELDS,
    with_partitions,
)

Attempts = Literal["latest", "all"]


def dataset_files(run_dir: str | Path, dataset: str, attempts: Attempts = "latest") -> list[Path]:
    """The Parquet files of `dataset` a reader should see: those of committed attempts (each
    cell's latest only, unless attempts="all")."""
    if attempts not in ("latest", "all"):
        raise ValueError(f"attempts must be 'latest' or 'all', got {attempts!r}")
    run_dir = Path(run_dir)
    return select(attempt_files(run_dir, dataset), committed_attempts(run_dir), attempts)


def _read(run_dir: Path, dataset: str, fields: pa.Schema, columns: list[str] | None = None,
          attempts: Attempts = "latest") -> pd.DataFrame:
    """`dataset` of the run as one frame with `fields` plus the partition columns."""
    folder = Path(run_dir) / dataset
    schema = with_partitions(fields)
    files = dataset_files(run_dir, dataset, attempts) if folder.is_dir() else []
    if not files:
        empty = schema.empty_table()
        return (empty.select(columns) if columns else empty).to_pandas()
    data = ds.dataset(
        [str(f) for f in files],
        format="parquet",
        schema=schema,
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
        partition_base_dir=str(folder),
    )
    return data.to_table(columns=columns).to_pandas()


def load_requests(run_dir: str | Path, columns: list[str] | None = None,
                  attempts: Attempts = "latest") -> pd.DataFrame:
    """One row per measured request of each cell's latest committed attempt (only `columns`
    if given: the per-token `itl_s` lists are most of the bytes)."""
    return _read(Path(run_dir), "requests", REQUEST_FIELDS, columns, attempts)


def load_cells(run_dir: str | Path, attempts: Attempts = "latest") -> pd.DataFrame:
    """One row per cell: its latest committed attempt; attempts="all": one row per committed
    attempt."""
    cells = _read(Path(run_dir), "cells", CELL_FIELDS, attempts=attempts)
    return cells.sort_values(["cell_id", "attempt"]).reset_index(drop=True)


def load_server_metrics(run_dir: str | Path, attempts: Attempts = "latest") -> pd.DataFrame:
    """The servers' /metrics samples during each cell, long format (metric, labels, value)."""
    return _read(Path(run_dir), "server_metrics", SERVER_METRIC_FIELDS, attempts=attempts)
