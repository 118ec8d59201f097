"""Checksums of committed files (grid/store/integrity.py checks them): the cell row's `files`
manifest and the row file's self-seal in its footer (`specgrid.sha256`), docs/runs.md."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grid.store.files import patch_bytes

DIGEST_KEY = "specgrid.sha256"
"""The cell row's own checksum, in its Parquet footer's key-value metadata."""
MANIFEST_COLUMN = "files"
"""The cell row column with its attempt's data files: JSON {dataset: {size, sha256, mtime_ns}}."""
PLACEHOLDER = b"0" * 64
_VALUE_HEADER = b"\x18\x40"
"""Thrift compact encoding between a key-value pair's key and a 64-byte value: field 2, binary,
length 64."""
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_entry(path: Path) -> dict[str, Any]:
    """What the manifest records of one data file (sha256, size and mtime as it is now)."""
    stat = os.stat(path)
    return {"size": stat.st_size, "sha256": sha256_file(path), "mtime_ns": stat.st_mtime_ns}


def _seal_offset(data: bytes) -> int | None:
    """Where the 64 characters of the cell row's own checksum start in its bytes; None if the
    footer holds none."""
    if len(data) < 12 or data[-4:] != b"PAR1":
        return None
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    key = DIGEST_KEY.encode()
    at = data.rfind(key + _VALUE_HEADER, max(footer_start, 0))
    if at < 0:
        return None
    start = at + len(key) + len(_VALUE_HEADER)
    return start if start + 64 <= len(data) - 8 else None


def write_sealed(table: pa.Table, path: Path) -> str:
    """Write the cell row `table` to `path` carrying its own sha256 (docs/runs.md)."""
    meta = dict(table.schema.metadata or {})
    meta[DIGEST_KEY.encode()] = PLACEHOLDER
    pq.write_table(table.replace_schema_metadata(meta), path, write_page_checksum=True)
    data = Path(path).read_bytes()
    at = _seal_offset(data)
    if at is None or data[at:at + 64] != PLACEHOLDER:
        raise OSError(f"cannot seal {path}: no checksum field in its footer")
    digest = hashlib.sha256(data).hexdigest()
    patch_bytes(path, at, digest.encode())
    return digest


def seal_problem(path: Path) -> str | None:
    """Why a cell row file fails its own checksum, or None if it passes (or, written before
    checksums existed, carries no `files` column and no seal)."""
    data = Path(path).read_bytes()
    at = _seal_offset(data)
    if at is None:
        try:
            names = pq.read_schema(pa.BufferReader(data)).names
        except (OSError, pa.ArrowException, ValueError) as e:  # ValueError: bad UTF-8
            return f"unreadable ({first_line(e)})"
        return "its checksum is missing" if MANIFEST_COLUMN in names else None
    stored = data[at:at + 64]
    actual = hashlib.sha256(data[:at] + PLACEHOLDER + data[at + 64:]).hexdigest().encode()
    return None if stored == actual else "sha256 differs from the one it was committed with"


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
