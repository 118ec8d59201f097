"""`python -m grid.status RESULTS/RUN_ID`: the run's cells by status, with errors, and the
command that resumes it (the same command grid.run prints after an interruption or failure)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from grid.cli.runrecord import RUN_RECORD, resume_command
from grid.store.ledger import LEDGER_NAME, STATUSES, Ledger


def format_status(run_dir: Path) -> str:
    ledger = Ledger(run_dir)
    try:
        rows = ledger.rows()
    finally:
        ledger.close()
    lines = [f"run {run_dir.name}: {len(rows)} cells"]
    several_versions = len({r["engine_version"] for r in rows}) > 1
    for status in STATUSES:
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(f"usage: python -m grid.status RESULTS/RUN_ID\n\n{__doc__}")
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print("specgrid: error: usage: python -m grid.status RESULTS/RUN_ID", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    if not (run_dir / LEDGER_NAME).is_file():
        print(f"specgrid: error: {run_dir} is not a run folder (no {LEDGER_NAME})",
              file=sys.stderr)
        return 2
    try:
        print(format_status(run_dir))
    except sqlite3.Error as e:
        print(f"specgrid: error: cannot read the ledger of {run_dir}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
