"""What the grid's end-to-end tests share (tests/grid/execute/test_faults.py,
tests/grid/execute/test_controller.py, the searches' runs): a run of the smoke sweep's baseline
variant into a test's folder, a query of its ledger, the simulator starts that served, the
line a stalled cell's error states, and the check that no server it launched outlived it."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psutil

from actors._process import ADDRESS_IN_USE
from grid.run import RunOutcome, run

SMOKE_BASELINE = ["+sweep=smoke", "grid.axes.variant=[baseline]"]

STATED = re.compile(
    r"LoadTimeout: the load made no progress for (?P<bound>\d+) s \(no token streamed, no "
    r"request completed\) from (?P<since>[\d.]+) s into the cell: bound = "
    r"load\.request_timeout_s (?P<timeout>\S+) s \+ longest scheduled wait 0 s \+ stall "
    r"margin (?P<margin>\S+) s; failed (?P<failed>[\d.]+) s into the cell, recorded "
    r"(?P<later>[\d.]+) s later \(the load cancelled, the server's end of the cell\)")
"""A stalled cell's error line: its bound and where it comes from, when in the cell it was
counted from, when the cell failed and how long the rest took."""


def run_smoke(tmp_path: Path, *overrides: str) -> tuple[RunOutcome, str]:
    """The smoke sweep's baseline into `tmp_path` with `overrides`: (outcome, what it printed)."""
    lines: list[str] = []
    outcome = run([*SMOKE_BASELINE, f"results_dir={tmp_path}", *overrides], echo=lines.append)
    return outcome, "\n".join(lines)


def ledger_rows(run_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows `sql` selects from the run's SQLite ledger."""
    with sqlite3.connect(run_dir / "_ledger.sqlite") as db:
        return db.execute(sql).fetchall()


SIM_BANNER = "SIMULATED SGLang server"
"""The first line each start of the simulator writes to its log (engines/sim/server.py)."""


def served_starts(run_dir: Path) -> list[str]:
    """The server key of each simulator start in the ledger, in order, less the starts whose
    port another process took before the server bound it: the run starts that server again on
    another port at once (grid/execute/server.py PortLost, not counted against it), so such a start
    is no start of a server that served. Each start's part of the server's log (one file per
    server key, every start appended) says which, as the run reads it (ADDRESS_IN_USE)."""
    keys = [k for (k,) in ledger_rows(run_dir, "SELECT server_key FROM servers ORDER BY id")]
    lost: dict[str, list[bool]] = {}
    for key in set(keys):
        starts = (run_dir / "logs" / f"server-{key}.log").read_text().split(SIM_BANNER)[1:]
        assert len(starts) == keys.count(key), (key, len(starts), keys)
        lost[key] = [ADDRESS_IN_USE.search(part) is not None for part in starts]
    return [k for k in keys if not lost[k].pop(0)]


def assert_no_orphans(run_dir: Path) -> None:
    """Every server process the ledger recorded is gone (or a zombie awaiting its parent)."""
    for (pid,) in ledger_rows(run_dir, "SELECT pid FROM servers"):
        try:
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f"server {pid} alive"
        except psutil.NoSuchProcess:
            pass
