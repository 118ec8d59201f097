"""The run ledger: one SQLite file (WAL) in the run folder that says, for every cell, whether it
is pending, running, done, failed or interrupted, with attempts, timings, the error and the
server log tail; and which server processes the run started, so a later start can find and
kill the ones a killed driver left behind. The committed Parquet files are the truth; the
ledger follows them (docs/runs.md). The name starts with `_`, so Parquet dataset discovery
never reads it."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from grid.plan.cells import Cell

LEDGER_NAME = "_ledger.sqlite"
LOCK_NAME = "_driver.lock"


class Status(StrEnum):
    """A cell's state: the ledger's `status` and the committed cell row's (done, failed)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


FROM: dict[Status, tuple[Status, ...]] = {
    Status.RUNNING: (Status.PENDING, Status.FAILED, Status.INTERRUPTED),
    Status.DONE: (Status.RUNNING,),
    Status.FAILED: (Status.RUNNING,),
    Status.INTERRUPTED: (Status.RUNNING,),
}
"""The statuses a cell may come from, by the one it goes to, as a run moves it: an attempt
starts from pending, failed (retried) or interrupted, and ends done, failed or interrupted; a
done cell is never measured again. Only reconciliation with the committed files
(`follow_files`, the files being the truth) sets a status outside these moves."""


class StatusError(RuntimeError):
    """A move the table above does not allow (a bug: the one writer moved a cell wrongly)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    cell_id TEXT PRIMARY KEY,
    variant TEXT NOT NULL,
    workload TEXT NOT NULL,
    concurrency INTEGER,
    rate REAL,
    server_key TEXT NOT NULL,
    factors TEXT NOT NULL,
    engine_version TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    log_tail TEXT
);
CREATE TABLE IF NOT EXISTS servers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    server_key TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pgid INTEGER NOT NULL,
    host TEXT,
    create_time REAL,
    started_at REAL NOT NULL,
    stopped_at REAL
);
"""


class RunLockedError(RuntimeError):
    """Another driver is running this run."""


class Ledger:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LEDGER_NAME
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # --- cells -------------------------------------------------------------------------------
    def add_cells(self, cells: Iterable[Cell]) -> None:
        """Register cells as pending; cells already known keep their status."""
        with self.db:
            self.db.executemany(
                "INSERT OR IGNORE INTO cells (cell_id, variant, workload, concurrency, rate,"
                " server_key, factors, engine_version, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(c.cell_id, c.variant, c.workload, c.concurrency, c.rate, c.server_key,
                  json.dumps(c.factors, default=str), c.engine_version, Status.PENDING.value)
                 for c in cells],
            )

    def status(self, cell_id: str) -> Status:
        row = self.db.execute("SELECT status FROM cells WHERE cell_id=?", (cell_id,)).fetchone()
        return Status(row[0]) if row else Status.PENDING

    def _move(self, cell_id: str, to: Status, sets: str, values: tuple[Any, ...]) -> None:
        """Set `to` (and `sets`) where the cell's status is one `to` may come from (`FROM`);
        StatusError naming both otherwise."""
        came = FROM[to]
        with self.db:
            cur = self.db.execute(
                f"UPDATE cells SET status=?, {sets} WHERE cell_id=? AND status IN "
                f"({', '.join('?' * len(came))})", (to.value, *values, cell_id, *came))
        if cur.rowcount != 1:
            raise StatusError(f"cell {cell_id}: {self.status(cell_id)} cannot become {to} "
                              f"(only from {', '.join(came)})")

    def start_attempt(self, cell_id: str) -> int:
        """Mark the cell running and return its attempt number (1, 2, ...)."""
        self._move(cell_id, Status.RUNNING, "attempts=attempts+1, started_at=?, "
                   "finished_at=NULL, error=NULL, log_tail=NULL", (time.time(),))
        return self.db.execute(
            "SELECT attempts FROM cells WHERE cell_id=?", (cell_id,)).fetchone()[0]

    def finish(self, cell_id: str, status: Status, error: str | None = None,
               log_tail: str | None = None) -> None:
        """End the running attempt: done, failed or interrupted."""
        self._move(cell_id, Status(status), "finished_at=?, error=?, log_tail=?",
                   (time.time(), error, log_tail))

    def follow_files(self, cell_id: str, status: Status, attempts: int, error: str | None
                     ) -> None:
        """Set a cell's status from its committed files (reconciliation, outside `FROM`: the
        files are the truth): `attempts` is at least the highest attempt number on disk."""
        with self.db:
            self.db.execute(
                "UPDATE cells SET status=?, attempts=MAX(attempts, ?), error=? WHERE cell_id=?",
                (Status(status).value, attempts, error, cell_id))

    def mark_running_interrupted(self, reason: str) -> int:
        """Cells a previous driver left `running` become `interrupted`; returns how many."""
        with self.db:
            cur = self.db.execute(
                "UPDATE cells SET status=?, finished_at=?, error=? WHERE status=?",
                (Status.INTERRUPTED.value, time.time(), reason, Status.RUNNING.value))
        return cur.rowcount

    def counts(self, cell_ids: Iterable[str] | None = None) -> dict[Status, int]:
        rows = self.rows(cell_ids)
        out = {s: 0 for s in Status}
        for row in rows:
            out[Status(row["status"])] += 1
        return out

    def rows(self, cell_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        self.db.row_factory = sqlite3.Row
        try:
            rows = [dict(r) for r in self.db.execute("SELECT * FROM cells ORDER BY rowid")]
        finally:
            self.db.row_factory = None
        if cell_ids is not None:
            wanted = set(cell_ids)
            rows = [r for r in rows if r["cell_id"] in wanted]
        return rows

    # --- servers -----------------------------------------------------------------------------
    def server_started(self, server_key: str, pid: int, pgid: int, host: str | None = None,
                       create_time: float | None = None) -> int:
        """Record a server process: its pid and group, the host it runs on and its start time
        as the OS reports it (so a later cleanup never kills a process that reused the pid)."""
        with self.db:
            cur = self.db.execute(
                "INSERT INTO servers (server_key, pid, pgid, host, create_time, started_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (server_key, pid, pgid, host, create_time, time.time()))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def server_stopped(self, server_id: int) -> None:
        with self.db:
            self.db.execute("UPDATE servers SET stopped_at=? WHERE id=?", (time.time(), server_id))

    def unstopped_servers(self) -> list[tuple[int, int, int, str | None, float | None]]:
        """(id, pid, pgid, host, create_time) of servers never recorded as stopped."""
        return list(self.db.execute(
            "SELECT id, pid, pgid, host, create_time FROM servers WHERE stopped_at IS NULL"))


class DriverLock:
    """An exclusive lock on the run folder held for the driver's lifetime (released by the
    kernel if the driver dies), so two drivers never run the same run."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> DriverLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = Path(self.path).read_text().strip() or "?"
            os.close(self.fd)
            self.fd = None
            raise RunLockedError(
                f"another specgrid driver (pid {other}) is running this run") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
