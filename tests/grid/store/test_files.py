"""grid/store/files.py is the one writer of run-folder files: its atomic replace keeps the old
file when a write fails, and no other module of grid/ writes or renames files itself."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from grid.store import files
from grid.store.record import RunRecord

GRID = Path(__file__).resolve().parents[3] / "grid"
WRITER = "grid/store/files.py"
ALLOWED: dict[str, set[str]] = {
    # The ledger is SQLite (its own journal and locking) and the driver lock is an flock'ed
    # file: neither is a file replaced by rename, so files.py has nothing to offer them.
    "grid/store/ledger.py": {"sqlite3.connect", "os.open"},
    # Parquet is written only into the temporary file files.stage hands these two, which
    # files.commit then renames.
    "grid/store/results.py": {"pq.write_table"},
    "grid/store/checksums.py": {"pq.write_table"},
}
_WRITE_METHODS = {"write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to",
                  "to_parquet", "to_csv", "write_table"}
_WRITE_FLAGS = ("O_CREAT", "O_WRONLY", "O_RDWR", "O_APPEND", "O_TRUNC")
_RENAMES = {"os.replace", "os.rename", "os.renames", "os.link", "os.symlink", "shutil.move",
            "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _mode(call: ast.Call, position: int) -> str | None:
    """The `mode` argument of an open call as written ("?" if not a literal), None if absent."""
    arg = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if arg is None and len(call.args) > position:
        arg = call.args[position]
    if arg is None:
        return None
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "?"


def file_writes(source: str) -> list[tuple[int, str]]:
    """(line, call) of every call in `source` that writes, creates or renames a file."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        method = name.rsplit(".", 1)[-1]
        if name in _RENAMES or name in ("sqlite3.connect", "pq.write_table"):
            found.append((node.lineno, name))
        elif name == "os.open":
            if any(flag in ast.unparse(node) for flag in _WRITE_FLAGS):
                found.append((node.lineno, name))
        elif name == "open" or (method == "open" and isinstance(node.func, ast.Attribute)):
            mode = _mode(node, 1 if name == "open" else 0)
            if mode is not None and (mode == "?" or set(mode) & set("wax+")):
                found.append((node.lineno, f"{name}({mode!r})"))
        elif name.startswith(("tempfile.", "NamedTemporaryFile", "mkstemp")):
            found.append((node.lineno, name))
        elif isinstance(node.func, ast.Attribute) and method in _WRITE_METHODS:
            found.append((node.lineno, name))
        elif (isinstance(node.func, ast.Attribute) and method in ("rename", "replace")
              and len(node.args) == 1 and not node.keywords and name != "dataclasses.replace"):
            # Path.rename(target) / Path.replace(target): one positional argument; str.replace
            # takes two, DataFrame.rename and dataclasses.replace take keywords.
            found.append((node.lineno, name))
    return found


def test_the_scanner_sees_every_kind_of_write() -> None:
    """The check below is only as good as this: each line is a write it must report."""
    bad = "\n".join([
        "os.replace(a, b)", "tmp.replace(path)", "p.rename(q)", "p.write_text('x')",
        "p.write_bytes(b'x')", "open(p, 'w')", "open(p, mode='ab')", "p.open('w')",
        "open(p, m)", "os.open(p, os.O_RDWR | os.O_CREAT)", "tempfile.NamedTemporaryFile()",
        "shutil.move(a, b)", "p.mkdir(parents=True)", "p.touch()"])
    assert [line for line, _ in file_writes(bad)] == list(range(1, 15))
    fine = "\n".join(["s.replace('a', 'b')", "dataclasses.replace(x, y=1)", "open(p)",
                      "open(p, 'rb')", "df.rename(columns={})", "os.open(d, os.O_RDONLY)",
                      "p.read_text()"])
    assert file_writes(fine) == []


def test_only_the_store_writer_writes_run_folder_files() -> None:
    offenders = []
    for path in sorted(GRID.rglob("*.py")):
        module = path.relative_to(GRID.parent).as_posix()
        if module == WRITER:
            continue
        allowed = ALLOWED.get(module, set())
        for line, call in file_writes(path.read_text()):
            if call not in allowed:
                offenders.append(f"{module}:{line}: {call}")
    assert offenders == [], f"write run-folder files through {WRITER}"


def test_write_atomic_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    files.write_atomic(path, "old", fsync=False)
    files.write_atomic(path, b"new", fsync=True)
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_the_temporary_file_is_hidden_in_the_same_folder(tmp_path: Path) -> None:
    # Same folder: os.replace is a rename only within one file system. Hidden: Parquet dataset
    # discovery and the reconciliation (`.*.tmp`) rely on the leading dot.
    seen: list[Path] = []
    files.replace_with(tmp_path / "run.json", lambda tmp: (seen.append(tmp), tmp.write_text("{}")),
                       fsync=False)
    assert seen == [tmp_path / ".run.json.tmp"]


def test_a_value_that_fails_mid_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "search.json"
    files.write_json(path, {"step": 1}, fsync=True)
    # json.dump streams: "a" is written to the temporary file before the set fails.
    with pytest.raises(TypeError):
        files.write_json(path, {"a": 1, "b": {1, 2}}, fsync=True)
    assert json.loads(path.read_text()) == {"step": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search.json"]


def test_a_failed_rename_leaves_the_old_file(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "decision.json"
    files.write_atomic(path, "old", fsync=False)

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        files.write_atomic(path, "new", fsync=True)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decision.json"]


def test_fsync_covers_the_file_and_its_folder_only_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    files.write_atomic(tmp_path / "a", "x", fsync=False)
    assert synced == []
    files.write_atomic(tmp_path / "b", "x", fsync=True)
    assert len(synced) == 2  # the temporary file's bytes, then the folder's new entry


def test_workloads_are_recorded_once_per_content(tmp_path: Path) -> None:
    record = RunRecord(tmp_path, "run")
    try:
        record.record_workloads({"chat-abc.jsonl": [{"prompt_id": "p1", "text": "hi"}]})
        # The name carries the content's digest: a second call with other rows under the same
        # name is the same content, and the file is not rewritten.
        record.record_workloads({"chat-abc.jsonl": [{"prompt_id": "p2", "text": "other"}]})
    finally:
        record.close()
    lines = (tmp_path / "workloads" / "chat-abc.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"prompt_id": "p1", "text": "hi"}]
