"""Read a run's results with the explicit schema (pandas alone takes the schema from one file
and would drop columns missing there). Notebooks and the report read results through here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from grid.schema import (
    CELL_FIELDS,
    PARTITION_SCHEMA,
    REQUEST_FIELDS,
    SERVER_METRIC_FIELDS,
    TELEMETRY_FIELDS,
    with_partitions,
)

Filters = list[Any] | ds.Expression | None
"""Row filters: a pyarrow expression, or pandas/pyarrow-style tuples (`[(col, op, value)]`,
a list of such lists meaning OR)."""


def _read(run_dir: Path, dataset: str, fields, columns: list[str] | None = None,
          filters: Filters = None) -> pd.DataFrame:
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
    return data.to_table(columns=columns, filter=_expression(filters)).to_pandas()


def load_requests(run_dir: str | Path, columns: list[str] | None = None,
                  filters: Filters = None) -> pd.DataFrame:
    """One row per measured request of every committed cell (only `columns` if given: the
    per-token `itl_s` lists are most of the bytes; only rows matching `filters` if given,
    e.g. `[("variant", "=", "eagle3"), ("concurrency", ">=", 8)]`, pushed down to Parquet)."""
    return _read(Path(run_dir), "requests", REQUEST_FIELDS, columns, filters)


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


def _expression(filters: Filters) -> ds.Expression | None:
    if filters is None or isinstance(filters, ds.Expression):
        return filters
    return pq.filters_to_expression(filters)


def load_telemetry(run_dir: str | Path) -> pd.DataFrame:
    """GPU telemetry during each cell, long format (node, gpu, metric, value); a node without
    NVML has one `unavailable` row per cell with the reason in `note`."""
    return _read(Path(run_dir), "telemetry", TELEMETRY_FIELDS)


DATASETS = {"requests": REQUEST_FIELDS, "cells": CELL_FIELDS,
            "server_metrics": SERVER_METRIC_FIELDS, "telemetry": TELEMETRY_FIELDS}


def sql(*run_dirs: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views `requests`, `cells` (each cell's latest
    attempt), `server_metrics` and `telemetry` over one or several runs (files unioned by
    column name; `variant` and `workload` from the folder names). Query it like
    `sql(run_a, run_b).sql("SELECT run_id, variant, avg(output_tok_s) FROM cells GROUP BY
    ALL").df()`."""
    if not run_dirs:
        raise ValueError("sql() needs at least one run folder")
    con = duckdb.connect()
    for name, fields in DATASETS.items():
        files = [str(f) for d in run_dirs for f in sorted(Path(d, name).rglob("*.parquet"))
                 if not f.name.startswith((".", "_"))]
        if files:
            source = (f"read_parquet({_sql_list(files)}, hive_partitioning = true, "
                      "union_by_name = true)")
        else:
            con.register(f"_empty_{name}", with_partitions(fields).empty_table())
            source = f"_empty_{name}"
        if name == "cells" and files:
            source = (f"(SELECT * FROM {source} QUALIFY row_number() OVER "
                      "(PARTITION BY run_id, cell_id ORDER BY attempt DESC) = 1)")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM {source}")
    return con


def _sql_list(items: list[str]) -> str:
    return "[" + ", ".join("'" + i.replace("'", "''") + "'" for i in items) + "]"
