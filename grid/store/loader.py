"""Read a run's results with the explicit schema (pandas alone takes the schema from one file
and would drop columns missing there). Notebooks and the report read results through here.
Only committed attempts are read (by default each cell's latest; `attempts="all"` every one),
and a damaged file raises DamagedFileError or, given a `damaged` list, is left out and listed
there (docs/runs.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from grid.store.checksums import first_line
from grid.store.results import (
    attempt_files,
    committed_attempts,
    damaged_files,
    parse_name,
    select,
)
from grid.store.schema import (
    CELL_FIELDS,
    PARTITION_SCHEMA,
    REQUEST_FIELDS,
    SERVER_METRIC_FIELDS,
    TELEMETRY_FIELDS,
    TURN_FIELDS,
    with_partitions,
)

Attempts = Literal["latest", "all"]
_FORMAT = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
    page_checksum_verification=True))
Filters = list[Any] | ds.Expression | None
"""Row filters: a pyarrow expression, or pandas/pyarrow-style tuples (`[(col, op, value)]`,
a list of such lists meaning OR)."""


class DamagedFileError(OSError):
    """A committed file of a run cannot be read."""

    def __init__(self, run_dir: Path, path: Path, reason: str) -> None:
        self.path = Path(path)
        parsed = parse_name(self.path.name)
        self.cell_id: str | None = parsed[0] if parsed else None
        self.attempt: int | None = parsed[1] if parsed else None
        try:
            shown: Path | str = self.path.relative_to(run_dir)
        except ValueError:
            shown = self.path
        self.shown = str(shown)
        self.reason = reason
        super().__init__(f"cannot read {shown} (cell {self.cell_id}, attempt {self.attempt}): "
                         f"{reason}; python -m grid.status {run_dir} --verify sets it aside, "
                         "then the run's command measures the cell again")


def dataset_files(run_dir: str | Path, dataset: str, attempts: Attempts = "latest") -> list[Path]:
    """The Parquet files of `dataset` a reader should see: those of committed attempts (each
    cell's latest only, unless attempts="all")."""
    if attempts not in ("latest", "all"):
        raise ValueError(f"attempts must be 'latest' or 'all', got {attempts!r}")
    run_dir = Path(run_dir)
    return select(attempt_files(run_dir, dataset), committed_attempts(run_dir), attempts)


def set_aside_attempts(run_dir: str | Path) -> list[tuple[Path, str, int]]:
    """(cell row path, cell id, attempt) of each attempt set aside as damaged that no later
    committed attempt of its cell replaced (grid/store/results.py `set_aside`)."""
    run_dir = Path(run_dir)
    latest = {cell: mine[-1] for cell, mine in committed_attempts(run_dir).items()}
    out: dict[tuple[str, int], Path] = {}
    for f in damaged_files(run_dir):  # cell rows first
        if f.attempt > latest.get(f.cell_id, 0):
            out.setdefault((f.cell_id, f.attempt), f.path)
    return [(path, cell, attempt) for (cell, attempt), path in out.items()]


def _read(run_dir: Path, dataset: str, fields: pa.Schema, columns: list[str] | None = None,
          attempts: Attempts = "latest", filters: Filters = None,
          damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """`dataset` of the run as one frame with `fields` plus the partition columns. A file that
    cannot be read raises DamagedFileError, or with a `damaged` list is left out and added to
    it."""
    folder = Path(run_dir) / dataset
    schema = with_partitions(fields)
    files = dataset_files(run_dir, dataset, attempts) if folder.is_dir() else []
    while True:
        if not files:
            empty = schema.empty_table()
            return (empty.select(columns) if columns else empty).to_pandas()
        try:
            return _scan(folder, files, schema).to_table(
                columns=columns, filter=_expression(filters)).to_pandas()
        except (OSError, pa.ArrowException):
            # Which file? Read each alone (only after an error: a damaged run is rare).
            bad = [DamagedFileError(Path(run_dir), f, reason) for f in files
                   if (reason := _unreadable(folder, f, schema, columns))]
            if not bad:
                raise
            if damaged is None:
                raise bad[0] from None
            damaged.extend(bad)
            files = [f for f in files if f not in {b.path for b in bad}]


def _scan(folder: Path, files: list[Path], schema: pa.Schema) -> ds.Dataset:
    return ds.dataset([str(f) for f in files], format=_FORMAT, schema=schema,
                      partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
                      partition_base_dir=str(folder))


def _unreadable(folder: Path, path: Path, schema: pa.Schema,
                columns: list[str] | None) -> str | None:
    try:
        _scan(folder, [path], schema).to_table(columns=columns)
    except (OSError, pa.ArrowException) as e:
        return first_line(e)
    return None


def _expression(filters: Filters) -> ds.Expression | None:
    if filters is None or isinstance(filters, ds.Expression):
        return filters
    return pq.filters_to_expression(filters)


def load_requests(run_dir: str | Path, columns: list[str] | None = None,
                  attempts: Attempts = "latest", filters: Filters = None,
                  damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """One row per measured request of each cell's latest committed attempt (only `columns`
    if given: the per-token `itl_s` lists are most of the bytes; only rows matching `filters`
    if given, e.g. `[("variant", "=", "eagle3"), ("concurrency", ">=", 8)]`, pushed down to
    Parquet)."""
    return _read(Path(run_dir), "requests", REQUEST_FIELDS, columns, attempts, filters, damaged)


def load_cells(run_dir: str | Path, attempts: Attempts = "latest",
               damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """One row per cell: its latest committed attempt; attempts="all": one row per committed
    attempt."""
    cells = _read(Path(run_dir), "cells", CELL_FIELDS, attempts=attempts, damaged=damaged)
    return cells.sort_values(["cell_id", "attempt"]).reset_index(drop=True)


def load_server_metrics(run_dir: str | Path, attempts: Attempts = "latest",
                        damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """The servers' /metrics samples during each cell, long format (metric, labels, value)."""
    return _read(Path(run_dir), "server_metrics", SERVER_METRIC_FIELDS, attempts=attempts,
                 damaged=damaged)


def load_telemetry(run_dir: str | Path, attempts: Attempts = "latest",
                   damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """GPU telemetry during each cell, long format (node, gpu, metric, value); a node without
    NVML has one `unavailable` row per cell with the reason in `note`."""
    return _read(Path(run_dir), "telemetry", TELEMETRY_FIELDS, attempts=attempts,
                 damaged=damaged)


def load_turns(run_dir: str | Path, columns: list[str] | None = None,
               attempts: Attempts = "latest", filters: Filters = None,
               damaged: list[DamagedFileError] | None = None) -> pd.DataFrame:
    """One row per round of each replayed conversation (workload.kind=conversations) of each
    cell's latest committed attempt; empty for a run without conversation cells."""
    return _read(Path(run_dir), "turns", TURN_FIELDS, columns, attempts, filters, damaged)


DATASETS = {"requests": REQUEST_FIELDS, "cells": CELL_FIELDS,
            "server_metrics": SERVER_METRIC_FIELDS, "telemetry": TELEMETRY_FIELDS,
            "turns": TURN_FIELDS}


def sql(*run_dirs: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views `requests`, `cells`, `server_metrics`,
    `telemetry` and `turns` over one or several runs: each cell's latest committed attempt
    (files unioned by column name; `variant` and `workload` from the folder names). Query it like
    `sql(run_a, run_b).sql("SELECT run_id, variant, avg(output_tok_s) FROM cells GROUP BY
    ALL").df()`."""
    if not run_dirs:
        raise ValueError("sql() needs at least one run folder")
    con = duckdb.connect()
    for name, fields in DATASETS.items():
        files = [str(f) for d in run_dirs for f in dataset_files(d, name)]
        if files:
            source = (f"read_parquet({_sql_list(files)}, hive_partitioning = true, "
                      "union_by_name = true)")
        else:
            con.register(f"_empty_{name}", with_partitions(fields).empty_table())
            source = f"_empty_{name}"
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM {source}")
    return con


def _sql_list(items: list[str]) -> str:
    return "[" + ", ".join("'" + i.replace("'", "''") + "'" for i in items) + "]"
