"""The results store: each cell attempt's requests, server metrics and cell row, committed so
that they become visible together or not at all. Only the driver writes. The layout (hive
partitions; superseded attempts under `_` names that readers skip), the commit protocol (the
cell row is the commit point; `reconcile` deletes uncommitted attempts) and damaged attempts
set aside as `_<cell_id>.a<attempt>.damaged.parquet`: docs/runs.md."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grid.store.checksums import MANIFEST_COLUMN, manifest_entry, write_sealed
from grid.store.files import TEMP_SUFFIX, commit, fsync_dir, make_dirs, stage
from grid.store.schema import (
    CELL_FIELDS,
    REQUEST_FIELDS,
    SERVER_METRIC_FIELDS,
    TELEMETRY_FIELDS,
    TURN_FIELDS,
)

COMMIT_DATASET = "cells"
"""The dataset whose file commits an attempt (written last)."""
DATA_DATASETS = ("requests", "server_metrics", "telemetry", "turns")
"""Datasets written per attempt before the commit."""
_NAME = re.compile(r"^(_?)([^./_][^/]*?)\.a(\d+)\.parquet$")
_DAMAGED = re.compile(r"^_([^./_][^/]*?)\.a(\d+)\.damaged\.parquet$")


class ResultsWriteError(OSError):
    """A results file could not be written; nothing was committed."""


@dataclass(frozen=True)
class AttemptFile:
    """One file of one cell attempt, as found on disk."""

    path: Path
    cell_id: str
    attempt: int
    superseded: bool
    """Renamed to its `_` name because a later attempt of the cell was committed."""


def partition_dir(root: Path, dataset: str, variant: str, workload: str) -> Path:
    return root / dataset / f"variant={variant}" / f"workload={workload}"


def attempt_name(cell_id: str, attempt: int, superseded: bool = False) -> str:
    return f"{'_' if superseded else ''}{cell_id}.a{attempt}.parquet"


def parse_name(name: str) -> tuple[str, int] | None:
    """(cell id, attempt) of an attempt file's name, superseded or not."""
    match = _NAME.match(name)
    return (match.group(2), int(match.group(3))) if match else None


def attempt_files(run_dir: Path, dataset: str) -> list[AttemptFile]:
    """Every attempt file of `dataset` (latest and superseded); temporary files excluded."""
    folder = Path(run_dir) / dataset
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.rglob("*.parquet")):
        match = _NAME.match(path.name)
        if match:
            out.append(AttemptFile(path, match.group(2), int(match.group(3)),
                                   bool(match.group(1))))
    return out


def committed_attempts(run_dir: Path) -> dict[str, list[int]]:
    """Cell id -> its committed attempts, ascending (those with a cell row)."""
    out: dict[str, list[int]] = {}
    for f in attempt_files(run_dir, COMMIT_DATASET):
        out.setdefault(f.cell_id, []).append(f.attempt)
    return {cell: sorted(attempts) for cell, attempts in out.items()}


def request_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([dict(r) for r in rows], schema=REQUEST_FIELDS)


def cell_table(row: Mapping[str, Any]) -> pa.Table:
    return pa.Table.from_pylist([dict(row)], schema=CELL_FIELDS)


def metrics_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([dict(r) for r in rows], schema=SERVER_METRIC_FIELDS)


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
    telemetry: Sequence[Mapping[str, Any]] = (),
    turns: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Commit one cell attempt (docs/runs.md). Tables are built before anything is
    written; ResultsWriteError if a file cannot be written (then nothing was committed)."""
    tables = {"requests": request_table(requests), "server_metrics": metrics_table(server_metrics),
              "telemetry": pa.Table.from_pylist([dict(r) for r in telemetry],
                                                schema=TELEMETRY_FIELDS),
              COMMIT_DATASET: cell_table(cell_row)}
    if turns:  # conversation cells only (grid/plan/conversations.py)
        tables["turns"] = pa.Table.from_pylist([dict(r) for r in turns], schema=TURN_FIELDS)
    commit_attempt(run_dir, variant, workload, cell_id, attempt, tables)


def commit_attempt(run_dir: Path, variant: str, workload: str, cell_id: str, attempt: int,
                   tables: Mapping[str, pa.Table]) -> None:
    """Write `tables` (dataset -> table; must include the cell row) as one attempt: all hidden
    and fsynced, data renamed into place, then the cell row, then earlier attempts hidden."""
    assert COMMIT_DATASET in tables, "an attempt is committed by its cell row"
    name = attempt_name(cell_id, attempt)
    order = [d for d in tables if d != COMMIT_DATASET] + [COMMIT_DATASET]
    staged: list[tuple[Path, Path]] = []
    manifest: dict[str, dict[str, Any]] = {}
    try:
        for dataset in order:
            folder = partition_dir(run_dir, dataset, variant, workload)
            make_dirs(folder)
            final = folder / name
            if dataset == COMMIT_DATASET:  # last: it records the others' checksums
                sealed = _with_manifest(tables[dataset], manifest)
                tmp = stage(final, partial(write_sealed, sealed), fsync=True)
            else:
                tmp = stage(final, partial(_write_parquet, tables[dataset]), fsync=True)
                manifest[dataset] = manifest_entry(tmp)  # a rename keeps bytes and mtime
            staged.append((tmp, final))
    except OSError as e:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise ResultsWriteError(f"cannot write results of cell {cell_id}: "
                                f"{e.strerror or e}") from None
    for tmp, final in staged:  # the cell row is last: its rename is the commit
        commit(tmp, final, fsync=True)
    for dataset in order:
        supersede(partition_dir(run_dir, dataset, variant, workload), cell_id, attempt)


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, write_page_checksum=True)


def _with_manifest(table: pa.Table, manifest: Mapping[str, Any]) -> pa.Table:
    value = pa.array([json.dumps(manifest, sort_keys=True)], pa.string())
    if MANIFEST_COLUMN in table.column_names:
        return table.set_column(table.column_names.index(MANIFEST_COLUMN), MANIFEST_COLUMN, value)
    return table.append_column(MANIFEST_COLUMN, value)


def damaged_name(cell_id: str, attempt: int) -> str:
    return f"_{cell_id}.a{attempt}.damaged.parquet"


def set_aside(run_dir: Path, cell_id: str, attempt: int) -> list[Path]:
    """Rename every file of one attempt to its damaged name (kept for inspection, read by
    nobody): the attempt is no longer committed. The cell row goes first, so a kill in between
    leaves an uncommitted attempt that reconciliation removes. Returns the new paths."""
    moved = []
    for dataset in (COMMIT_DATASET, *DATA_DATASETS):
        for f in attempt_files(run_dir, dataset):
            if f.cell_id == cell_id and f.attempt == attempt:
                target = f.path.with_name(damaged_name(cell_id, attempt))
                commit(f.path, target, fsync=True)
                moved.append(target)
    return moved


def damaged_files(run_dir: Path) -> list[AttemptFile]:
    """The files of attempts set aside as damaged (superseded=False)."""
    out = []
    for dataset in (COMMIT_DATASET, *DATA_DATASETS):
        folder = Path(run_dir) / dataset
        if folder.is_dir():
            for path in sorted(folder.rglob("_*.damaged.parquet")):
                match = _DAMAGED.match(path.name)
                if match:
                    out.append(AttemptFile(path, match.group(1), int(match.group(2)), False))
    return out


def supersede(folder: Path, cell_id: str, latest: int) -> None:
    """Hide the visible files of `cell_id`'s attempts before `latest` (rename to `_` names)."""
    changed = False
    for path in folder.glob(f"{cell_id}.a*.parquet"):
        match = _NAME.match(path.name)
        if match and match.group(2) == cell_id and int(match.group(3)) < latest:
            # not fsynced one by one: the folder is fsynced once below
            commit(path, path.with_name(attempt_name(cell_id, int(match.group(3)), True)),
                   fsync=False)
            changed = True
    if changed:
        fsync_dir(folder)


def reconcile(run_dir: Path) -> list[str]:
    """Bring the files to a committed state after a driver that died mid-commit: delete
    temporary files and uncommitted attempts (data without a cell row), hide attempts a later
    committed one supersedes. Returns one line per change."""
    run_dir = Path(run_dir)
    done = committed_attempts(run_dir)
    notes: list[str] = []
    for dataset in (COMMIT_DATASET, *DATA_DATASETS):
        folder = run_dir / dataset
        if not folder.is_dir():
            continue
        for tmp in folder.rglob(f".*{TEMP_SUFFIX}"):
            tmp.unlink()
            notes.append(f"removed unfinished file {tmp.relative_to(run_dir)}")
        for f in attempt_files(run_dir, dataset):
            attempts = done.get(f.cell_id, [])
            if f.attempt not in attempts:
                f.path.unlink()
                fsync_dir(f.path.parent)
                notes.append(f"removed uncommitted attempt {f.attempt} of cell {f.cell_id} "
                             f"({dataset})")
            elif not f.superseded and f.attempt < attempts[-1]:
                supersede(f.path.parent, f.cell_id, attempts[-1])
    return notes


def all_attempt_numbers(run_dir: Path) -> dict[str, int]:
    """Cell id -> the highest attempt number in any file, committed or not (damaged attempts
    set aside included, so a new attempt never takes their number)."""
    out: dict[str, int] = {}
    files = [f for d in (COMMIT_DATASET, *DATA_DATASETS) for f in attempt_files(run_dir, d)]
    for f in files + damaged_files(run_dir):
        out[f.cell_id] = max(out.get(f.cell_id, 0), f.attempt)
    return out


def select(files: Iterable[AttemptFile], committed: Mapping[str, list[int]],
           attempts: str) -> list[Path]:
    """The files a reader should see: of committed attempts only; with attempts="latest" only
    each cell's latest committed one, with "all" every committed one."""
    out = []
    for f in files:
        mine = committed.get(f.cell_id)
        if not mine or f.attempt not in mine:
            continue
        if attempts == "latest" and f.attempt != mine[-1]:
            continue
        out.append(f.path)
    return out
