"""The check that finds damaged attempts (bit rot, a bad copy between machines, a half-synced
folder) by comparing the committed files with the checksums their commit recorded
(grid/store/checksums.py): cheap on every start, deep (every file hashed) on
`python -m grid.status RUN --verify` and after a cheap check that found a problem
(docs/runs.md, "Checksums and damaged files")."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grid.store.checksums import MANIFEST_COLUMN, first_line, seal_problem, sha256_file
from grid.store.results import COMMIT_DATASET, DATA_DATASETS, attempt_files, committed_attempts


@dataclass(frozen=True)
class Damage:
    """One committed file that does not match its record (or cannot be read)."""

    path: Path
    dataset: str
    cell_id: str
    attempt: int
    reason: str

    def line(self, run_dir: Path) -> str:
        try:
            shown: Path | str = self.path.relative_to(run_dir)
        except ValueError:
            shown = self.path
        return f"damaged: {shown} (cell {self.cell_id}, attempt {self.attempt}): {self.reason}"


def _manifest(path: Path) -> tuple[dict[str, dict[str, Any]] | None, str | None]:
    """The manifest a cell row file records (None for a row written before checksums), or the
    reason it cannot be read."""
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        # a damaged footer can read and still hold field names that are no UTF-8
        if MANIFEST_COLUMN not in table.column_names or table.num_rows != 1:
            return None, None
        value = table.column(MANIFEST_COLUMN)[0].as_py()
    except (OSError, pa.ArrowException, ValueError) as e:
        return None, f"unreadable ({first_line(e)})"
    if value is None:
        return None, None
    try:
        manifest = json.loads(value)
    except ValueError:
        return None, "its manifest of files is not valid JSON"
    return manifest, None


def check(run_dir: Path, deep: bool = False, attempts: str = "latest") -> list[Damage]:
    """The damaged files of the run's committed attempts (each cell's latest, or with
    attempts="all" every committed one): cheap unless `deep` (docs/runs.md); a cheap
    check that finds anything goes on deep, since whatever damaged one file (a bad copy, a
    half sync) may have damaged others without changing their size."""
    run_dir = Path(run_dir)
    committed = committed_attempts(run_dir)
    wanted = {(cell, a) for cell, mine in committed.items()
              for a in (mine if attempts == "all" else mine[-1:])}
    rows = {(f.cell_id, f.attempt): f.path for f in attempt_files(run_dir, COMMIT_DATASET)
            if (f.cell_id, f.attempt) in wanted}
    data = {(d, f.cell_id, f.attempt): f.path for d in DATA_DATASETS
            for f in attempt_files(run_dir, d) if (f.cell_id, f.attempt) in wanted}

    def run(deep: bool) -> list[Damage]:
        out: list[Damage] = []
        for (cell, attempt), row in sorted(rows.items()):
            problem = seal_problem(row)
            manifest, unreadable = _manifest(row)
            problem = problem or unreadable
            if problem:
                out.append(Damage(row, COMMIT_DATASET, cell, attempt, problem))
                continue
            if manifest is None:  # committed before checksums: only whether it reads
                out += _readable(data, cell, attempt)
                continue
            for dataset in DATA_DATASETS:
                path = data.get((dataset, cell, attempt))
                record = manifest.get(dataset)
                if record is None:
                    if path is not None:
                        out.append(Damage(path, dataset, cell, attempt,
                                          "not in its attempt's manifest"))
                    continue
                if path is None:
                    name = row.name
                    where = row.parent.relative_to(run_dir / COMMIT_DATASET)
                    out.append(Damage(run_dir / dataset / where / name, dataset, cell, attempt,
                                      "missing"))
                    continue
                stat = os.stat(path)
                if stat.st_size != record["size"]:
                    out.append(Damage(path, dataset, cell, attempt,
                                      f"{stat.st_size} bytes, committed with {record['size']}"))
                elif ((deep or stat.st_mtime_ns != record.get("mtime_ns"))
                      and sha256_file(path) != record["sha256"]):
                    out.append(Damage(path, dataset, cell, attempt,
                                      "sha256 differs from the one it was committed with"))
        return out

    found = run(deep)
    return run(True) if found and not deep else found


def _readable(data: dict[tuple[str, str, int], Path], cell: str, attempt: int) -> list[Damage]:
    out = []
    for (dataset, c, a), path in sorted(data.items()):
        if (c, a) != (cell, attempt):
            continue
        try:
            pq.read_metadata(path)
        except (OSError, pa.ArrowException, ValueError) as e:
            out.append(Damage(path, dataset, cell, attempt, f"unreadable ({first_line(e)})"))
    return out


def damaged_cells(damage: Iterable[Damage]) -> dict[tuple[str, int], list[Damage]]:
    """The damage grouped by attempt (cell id, attempt)."""
    out: dict[tuple[str, int], list[Damage]] = {}
    for d in damage:
        out.setdefault((d.cell_id, d.attempt), []).append(d)
    return out
