"""Read a run's results with the explicit schema (pandas alone takes the schema from one file
and would drop columns missing there). Notebooks and the report read results through here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds

from grid.schema import (
    CELL_FIELDS,
    PARTITION_SCHEMA,
    REQUEST_FIELDS,
    SERVER_METRIC_FIELDS,
    with_partitions,
)


def _read(run_dir: Path, dataset: str, fields, columns: list[str] | None = None) -> pd.DataFrame:
    folder = Path(run_dir) / dataset
    schema = with_partitions(fields)
    if not folder.is_dir():
        empty = schema.empty_table()
        return (empty.select(columns) if columns else empty).to_pandas()
    data = ds.dataset(
        folder,
        format="parquet",
        schema=schema,
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
    )
    return data.to_table(columns=columns).to_pandas()


def load_requests(run_dir: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """One row per measured request of every committed cell (only `columns` if given: the
    per-token `itl_s` lists are most of the bytes)."""
    return _read(Path(run_dir), "requests", REQUEST_FIELDS, columns)


def load_cells(run_dir: str | Path, latest: bool = True) -> pd.DataFrame:
    """One row per cell attempt; with latest=True only each cell's last attempt."""
    cells = _read(Path(run_dir), "cells", CELL_FIELDS)
    if latest and len(cells):
        cells = cells.sort_values("attempt").drop_duplicates("cell_id", keep="last")
        cells = cells.reset_index(drop=True)
    return cells


def load_server_metrics(run_dir: str | Path) -> pd.DataFrame:
    """The servers' /metrics samples during each cell, long format (metric, labels, value)."""
    return _read(Path(run_dir), "server_metrics", SERVER_METRIC_FIELDS)
