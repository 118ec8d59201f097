"""The one writer of a run folder's files: every file under `results/<run_id>/` is written,
renamed or appended to here, and nowhere else in grid/ (tests/grid/store/test_files.py checks
that). A file is replaced atomically (written as `.<name>.tmp` in its folder, then
`os.replace`); `fsync=True` where it must survive a power loss (docs/architecture.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


def temp_path(path: Path) -> Path:
    """The hidden temporary name `path` is staged under (reconciliation removes leftovers:
    grid/store/results.py `reconcile`)."""
    return path.with_name(f".{path.name}{TEMP_SUFFIX}")


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path, *, fsync: bool = True) -> None:
    """Create `folder` (and parents); with `fsync`, each parent whose entries changed is
    fsynced, so a file committed inside it cannot lose its folder in a power loss."""
    missing: list[Path] = []
    path = Path(folder)
    while not path.exists():
        missing.append(path)
        path = path.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        if fsync:
            fsync_dir(new.parent)


def check_writable(folder: Path) -> None:
    """Create `folder` and prove a file can be created in it (OSError if not), before a run
    starts anything that would fail later on its first commit."""
    make_dirs(folder)
    probe = Path(folder) / f".write-check{TEMP_SUFFIX}"
    probe.touch()
    probe.unlink()


def stage(path: Path, write: Callable[[Path], object], *, fsync: bool) -> Path:
    """Write `path`'s content under its temporary name with `write(tmp)` (fsynced with
    `fsync`) and return the temporary path, for `commit` to rename. Several files can be
    staged before any is committed (a cell attempt: grid/store/results.py). If `write` raises,
    the temporary file is removed and the exception propagates."""
    tmp = temp_path(Path(path))
    try:
        write(tmp)
        if fsync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def commit(tmp: Path, final: Path, *, fsync: bool) -> None:
    """Rename a staged (or any) file over `final`; with `fsync` the folder is fsynced so the
    rename survives a power loss. The only rename of run-folder files in grid/."""
    os.replace(tmp, final)
    if fsync:
        fsync_dir(Path(final).parent)


def replace_with(path: Path, write: Callable[[Path], object], *, fsync: bool) -> None:
    """Replace `path` with what `write(tmp)` writes: staged, then committed. If either step
    fails, the temporary file is removed and `path` is as it was."""
    tmp = stage(path, write, fsync=fsync)
    try:
        commit(tmp, Path(path), fsync=fsync)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes | str, *, fsync: bool) -> None:
    """Replace `path` with `data` (str: UTF-8) atomically (module docstring)."""
    payload = data.encode() if isinstance(data, str) else data
    replace_with(path, lambda tmp: tmp.write_bytes(payload), fsync=fsync)


def write_json(path: Path, value: Any, *, fsync: bool, indent: int | None = 2) -> None:
    """Replace `path` with `value` as JSON (one trailing newline). The JSON is streamed into
    the temporary file, so a value that cannot be serialized fails mid-write and leaves the
    old file untouched."""
    def dump(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=indent)
            f.write("\n")
    replace_with(path, dump, fsync=fsync)


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]], *, fsync: bool) -> None:
    """Replace `path` with one JSON object per line."""
    def dump(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(dict(row)) + "\n")
    replace_with(path, dump, fsync=fsync)


def append_text(path: Path, text: str) -> None:
    """Append to a log (a server's log, kept across its relaunches): not atomic, a log read
    while it grows is still a log."""
    make_dirs(Path(path).parent, fsync=False)
    with open(path, "a", encoding="utf-8", errors="replace") as f:
        f.write(text)


def patch_bytes(path: Path, offset: int, data: bytes) -> None:
    """Overwrite `len(data)` bytes of `path` at `offset` in place (a staged cell row's seal:
    grid/store/checksums.py; same length, so the file keeps its layout)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
