"""What the grid's end-to-end failure tests share (tests/grid/execute/test_faults.py,
tests/grid/execute/test_controller.py): a run of the smoke sweep's baseline variant into a test's
folder, a query of its ledger, and the check that no server it launched outlived it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psutil

from grid.run import RunOutcome, run

SMOKE_BASELINE = ["+sweep=smoke", "grid.axes.variant=[baseline]"]


def run_smoke(tmp_path: Path, *overrides: str) -> tuple[RunOutcome, str]:
    """The smoke sweep's baseline into `tmp_path` with `overrides`: (outcome, what it printed)."""
    lines: list[str] = []
    outcome = run([*SMOKE_BASELINE, f"results_dir={tmp_path}", *overrides], echo=lines.append)
    return outcome, "\n".join(lines)


def ledger_rows(run_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows `sql` selects from the run's SQLite ledger."""
    with sqlite3.connect(run_dir / "_ledger.sqlite") as db:
        return db.execute(sql).fetchall()


def assert_no_orphans(run_dir: Path) -> None:
    """Every server process the ledger recorded is gone (or a zombie awaiting its parent)."""
    for (pid,) in ledger_rows(run_dir, "SELECT pid FROM servers"):
        try:
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f"server {pid} alive"
        except psutil.NoSuchProcess:
            pass
