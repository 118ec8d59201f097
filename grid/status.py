"""`python -m grid.status RESULTS/RUN_ID [--verify]`: the run's cells by status, with errors, and
the command that resumes it (the same command grid.run prints after an interruption or failure).

--verify checks every committed file (each attempt's, superseded ones too) against the sha256
its commit recorded: one line per damaged file, naming it and its cell; damaged attempts are set
aside and their cells return to pending, so the run's command measures them again (unless a
driver is running the folder: then it only reports). Exit code 1 when anything is damaged."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from grid.cli.runrecord import RUN_RECORD, resume_command
from grid.store import integrity
from grid.store.ledger import LEDGER_NAME, DriverLock, Ledger, RunLockedError, Status
from grid.store.record import RunRecord

USAGE = "usage: python -m grid.status RESULTS/RUN_ID [--verify]"


def format_status(run_dir: Path) -> str:
    ledger = Ledger(run_dir)
    try:
        rows = ledger.rows()
    finally:
        ledger.close()
    lines = [f"run {run_dir.name}: {len(rows)} cells"]
    several_versions = len({r["engine_version"] for r in rows}) > 1
    for status in Status:
        members = [r for r in rows if r["status"] == status]
        if not members:
            continue
        lines.append(f"\n{status} ({len(members)})")
        for r in members:
            load = f"c={r['concurrency']}" if r["rate"] is None else f"rate={r['rate']}/s"
            line = f"  {r['cell_id']}  {r['variant']} {r['workload']} {load}"
            if several_versions:
                line += f"  [{r['engine_version'] or 'unknown'}]"
            if r["attempts"] > 1:
                line += f"  attempts={r['attempts']}"
            if r["error"]:
                line += f"\n      error: {r['error'].splitlines()[0]}"
            lines.append(line)
    unfinished = sum(1 for r in rows if r["status"] != "done")
    if unfinished:
        if (run_dir / RUN_RECORD).is_file():
            lines.append(f"\n{unfinished} cell(s) not done; resume with: "
                         f"{resume_command(run_dir)}")
        else:
            lines.append(f"\n{unfinished} cell(s) not done; this folder has no {RUN_RECORD} "
                         "(no execution recorded its command line): re-run the command that "
                         "started it")
    return "\n".join(lines)


def verify(run_dir: Path) -> tuple[list[str], bool]:
    """Check every committed file's checksum (module docstring): the lines to print, and
    whether anything is damaged."""
    damage = integrity.check(run_dir, deep=True, attempts="all")
    if not damage:
        return ["verify: every committed file matches its checksum"], False
    try:
        with DriverLock(run_dir):
            record = RunRecord(run_dir, run_dir.name)
            try:
                lines = record.set_aside(damage)
            finally:
                record.close()
    except RunLockedError as e:
        return [d.line(run_dir) for d in damage] + [f"not set aside: {e}"], True
    return lines + [f"verify: {len(damage)} damaged file(s); the run's command measures their "
                    "cells again"], True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    check = "--verify" in args
    args = [a for a in args if a != "--verify"]
    if len(args) != 1 or args[0].startswith("-"):
        print(f"specgrid: error: {USAGE}", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    if not (run_dir / LEDGER_NAME).is_file():
        print(f"specgrid: error: {run_dir} is not a run folder (no {LEDGER_NAME})",
              file=sys.stderr)
        return 2
    damaged = False
    try:
        if check:
            lines, damaged = verify(run_dir)
            print("\n".join(lines) + "\n")
        print(format_status(run_dir))
    except sqlite3.Error as e:
        print(f"specgrid: error: cannot read the ledger of {run_dir}: {e}", file=sys.stderr)
        return 2
    return 1 if damaged else 0


if __name__ == "__main__":
    sys.exit(main())
