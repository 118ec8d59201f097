"""Damaged results (bit rot, a bad copy, a half sync): every committed file carries its sha256 in
its attempt's commit; the start of a run finds a damaged attempt, names the file and its cell,
sets it aside and measures the cell again with the same command, touching nothing else; the
loader and the report name the file instead of a traceback; `grid.status --verify` hashes
everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grid.loader import load_cells
from grid.report import write_report
from grid.store import integrity, results
from grid.store.checksums import MANIFEST_COLUMN, seal_problem
from grid.store.loader import DamagedFileError, load_requests
from grid.store.results import write_cell


def _flip(path: Path, at: float = 0.5, keep_mtime: bool = False) -> None:
    """Corrupt one byte (at a fraction of the file's length); keep_mtime: as bit rot does."""
    stat = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(int(stat.st_size * at))
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _commit(run_dir: Path, cell_id: str = "c1", n: int = 50) -> None:
    row = {"run_id": "r", "cell_id": cell_id, "attempt": 1}
    write_cell(run_dir, variant="baseline", workload="coding", cell_id=cell_id, attempt=1,
               requests=[{**row, "request_id": f"q{i}", "status": "ok", "itl_s": [0.01] * 8}
                         for i in range(n)],
               cell_row={**row, "status": "done"},
               server_metrics=[{**row, "metric": "m", "value": float(i)} for i in range(n)],
               telemetry=[{**row, "node": "n", "gpu": 0, "metric": "power_w", "value": 1.0}],
               turns=[{**row, "conversation_id": "k", "turn_index": i, "status": "ok"}
                      for i in range(n)])


def _file(run_dir: Path, dataset: str, cell_id: str, attempt: int = 1) -> Path:
    [path] = (run_dir / dataset).rglob(results.attempt_name(cell_id, attempt))
    return path


def test_the_commit_records_every_files_checksum(tmp_path):
    _commit(tmp_path)
    manifest = json.loads(load_cells(tmp_path)[MANIFEST_COLUMN].iloc[0])
    assert sorted(manifest) == ["requests", "server_metrics", "telemetry", "turns"]
    for dataset, record in manifest.items():
        path = _file(tmp_path, dataset, "c1")
        assert record["size"] == path.stat().st_size
        assert record["sha256"] == integrity.sha256_file(path)
    row = _file(tmp_path, "cells", "c1")
    assert seal_problem(row) is None
    assert pq.read_table(row).num_rows == 1  # the sealed file is plain Parquet
    assert integrity.check(tmp_path, deep=True) == []


def test_every_byte_of_a_cell_row_is_covered_by_its_own_checksum(tmp_path):
    _commit(tmp_path)
    row = _file(tmp_path, "cells", "c1")
    good = row.read_bytes()
    missed = []
    for at in range(0, len(good), 7):
        bad = bytearray(good)
        bad[at] ^= 0x01
        row.write_bytes(bad)
        if seal_problem(row) is None:
            missed.append(at)
    assert missed == []


@pytest.mark.parametrize("dataset", ["requests", "server_metrics", "telemetry", "turns"])
def test_a_flipped_byte_in_each_data_file_is_found(tmp_path, dataset):
    _commit(tmp_path)
    _commit(tmp_path, cell_id="c2")
    path = _file(tmp_path, dataset, "c1")
    _flip(path, keep_mtime=True)
    # Bit rot leaves size and mtime: only hashing finds it.
    assert integrity.check(tmp_path) == []
    [damage] = integrity.check(tmp_path, deep=True)
    assert (damage.path, damage.cell_id, damage.attempt) == (path, "c1", 1)
    assert damage.line(tmp_path).startswith(
        f"damaged: {path.relative_to(tmp_path)} (cell c1, attempt 1): sha256 differs")
    # A write that changes the mtime (a copy, a sync) is hashed by the cheap check.
    os.utime(path)
    assert [d.path for d in integrity.check(tmp_path)] == [path]


def test_a_truncated_file_is_found_by_its_size(tmp_path):
    _commit(tmp_path)
    path = _file(tmp_path, "requests", "c1")
    stat = path.stat()
    os.truncate(path, stat.st_size // 2)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    [damage] = integrity.check(tmp_path)
    assert "bytes, committed with" in damage.reason


def test_the_loader_names_an_unreadable_file_in_one_line(tmp_path):
    _commit(tmp_path)
    _commit(tmp_path, cell_id="c2")
    path = _file(tmp_path, "requests", "c1")
    _flip(path)
    with pytest.raises(DamagedFileError) as caught:
        load_requests(tmp_path)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"cannot read {path.relative_to(tmp_path)} (cell c1, attempt 1): ")
    damaged: list[DamagedFileError] = []
    rest = load_requests(tmp_path, damaged=damaged)
    assert set(rest.cell_id) == {"c2"} and [d.path for d in damaged] == [path]


# --- real runs of the simulator ------------------------------------------------------------
def _sweep(results_dir: Path, *extra: str) -> list[str]:
    return ["+sweep=smoke", "grid.axes.variant=[baseline]", "run.id=r",
            f"results_dir={results_dir}", *extra]


def _snapshot(run_dir: Path, cell_ids: set[str]) -> dict[Path, tuple[int, bytes]]:
    """Every file of these cells: its mtime and bytes."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run_dir.rglob("*.parquet")
            if any(p.name.startswith((c, f"_{c}")) for c in cell_ids)}


@pytest.mark.slow
def test_damage_of_each_kind_is_set_aside_and_measured_again(tmp_path, ray_session):
    """One file of each kind damaged, in four cells of five: the same command names each file
    and its cell, measures those four again and leaves the fifth alone."""
    from grid.run import run

    sweep = _sweep(tmp_path, "grid.axes.concurrency=[1,2,3,4,5]")
    assert run(sweep, echo=lambda line: None).exit_code == 0
    run_dir = tmp_path / "r"
    cells = load_cells(run_dir).sort_values("concurrency").cell_id.tolist()
    kinds = ["requests", "cells", "server_metrics", "telemetry"]
    damaged = dict(zip(cells, kinds, strict=False))
    kept = set(cells) - set(damaged)
    for cell_id, dataset in damaged.items():
        _flip(_file(run_dir, dataset, cell_id))
    before = _snapshot(run_dir, kept)

    lines: list[str] = []
    outcome = run(sweep, echo=lines.append)
    assert outcome.exit_code == 0, lines
    for cell_id, dataset in damaged.items():
        rel = _file(run_dir, dataset, cell_id, 2).relative_to(run_dir).with_name(
            results.attempt_name(cell_id, 1))
        named = [line for line in lines if line.startswith(f"damaged: {rel} (cell {cell_id}, "
                                                           "attempt 1)")]
        assert len(named) == 1, (rel, lines)
        assert results.damaged_name(cell_id, 1) in {
            p.name for p in (run_dir / dataset).rglob("_*.damaged.parquet")}
    assert "5 cells: 1 done, 4 pending; running 4" in lines
    latest = load_cells(run_dir).set_index("cell_id")
    assert latest.attempt.to_dict() == {**{c: 2 for c in damaged}, **{c: 1 for c in kept}}
    assert set(latest.status) == {"done"}
    assert _snapshot(run_dir, kept) == before  # the intact cell: not re-run, not touched
    assert integrity.check(run_dir, deep=True) == []


@pytest.mark.slow
def test_bit_rot_in_the_report_and_under_verify(tmp_path, ray_session):
    """A flipped byte that keeps the file's size and mtime: the report still renders, naming
    the file and its cell; `grid.status --verify` exits 1 naming it and sets it aside; the
    same command then measures that cell again and only it."""
    from grid.run import run

    sweep = _sweep(tmp_path)
    assert run(sweep, echo=lambda line: None).exit_code == 0
    run_dir = tmp_path / "r"
    damaged, kept = load_cells(run_dir).cell_id.tolist()
    path = _file(run_dir, "requests", damaged)
    _flip(path, keep_mtime=True)
    rel = path.relative_to(run_dir)

    report = write_report(run_dir)
    html = (run_dir / "report.html").read_text()
    [warning] = [text for level, text in load_report_validity(run_dir) if "damaged" in text]
    assert f"{rel} (cell {damaged}, attempt 1)" in warning
    assert str(rel) in report.summary or str(rel) in html

    proc = subprocess.run([sys.executable, "-m", "grid.status", str(run_dir), "--verify"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"damaged: {rel} (cell {damaged}, attempt 1): sha256 differs" in proc.stdout
    assert "pending (1)" in proc.stdout
    before = _snapshot(run_dir, {kept})

    lines: list[str] = []
    assert run(sweep, echo=lines.append).exit_code == 0, lines
    assert "2 cells: 1 done, 1 pending; running 1" in lines
    assert load_cells(run_dir).set_index("cell_id").attempt.to_dict() == {damaged: 2, kept: 1}
    assert _snapshot(run_dir, {kept}) == before
    proc = subprocess.run([sys.executable, "-m", "grid.status", str(run_dir), "--verify"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout


def load_report_validity(run_dir: Path) -> list[tuple[str, str]]:
    decision = json.loads((run_dir / "decision.json").read_text())
    return [(v["level"], v["text"]) for v in decision["validity"]]


# without the hash the flips at 0.1 and 0.4 (a column the report does not read) went unnoticed
@pytest.mark.parametrize("at", [0.1, 0.2, 0.4, 0.5, 0.8])
def test_the_report_leaves_out_a_cell_whose_bytes_differ_wherever_the_flip(tmp_path, at):
    """Bit rot that keeps size and mtime, anywhere in the requests file (a column the report
    never reads included): the report hashes the files against the manifest, names the file
    and leaves its cell out; the other cell stays."""
    from grid.report.data import load_run

    run_dir = tmp_path / "r"
    _commit(run_dir, "c1")
    _commit(run_dir, "c2")
    path = _file(run_dir, "requests", "c1")
    _flip(path, at=at, keep_mtime=True)
    data = load_run(run_dir)
    rel = path.relative_to(run_dir)
    assert any(line.startswith(f"{rel} (cell c1, attempt 1)") for line in data.damaged), \
        data.damaged
    assert set(data.cells.cell_id) == {"c2"}
