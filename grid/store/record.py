"""The record of a run: the one writer of its ledger and its results. Every status change of a
cell and every server process the run starts goes through here, so the ledger and the
committed files cannot drift apart, and on every start they are reconciled both ways: a cell
the ledger calls done or failed whose files are missing runs again; a cell whose committed files
are newer than the ledger takes their status. Before that, the committed files are checked
against the checksums their commits recorded (grid/store/integrity.py): a damaged attempt is
set aside and its cell runs again. No Ray."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors._process import kill_recorded
from grid.plan.cells import Cell
from grid.store import integrity, results
from grid.store.files import make_dirs, write_jsonl
from grid.store.ledger import Ledger, Status
from grid.store.loader import load_cells
from grid.store.rows import CellOutcome

EXIT_FAILED_CELLS = 3
"""The exit code of a run or a search that ended with cells the record holds as failed (the same
command retries them)."""


class RunRecord:
    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.ledger = Ledger(run_dir)

    def close(self) -> None:
        self.ledger.close()

    # --- on start ------------------------------------------------------------------------------
    def recover(self, cells: Sequence[Cell], echo: Callable[[str], None]) -> None:
        """After an earlier driver: kill the servers it left, mark its running cells
        interrupted, finish or undo its half-done commits, register `cells`, and reconcile the
        ledger with the committed files."""
        here = socket.gethostname()
        for server_id, pid, pgid, host, started in self.ledger.unstopped_servers():
            if host not in (None, here):
                echo(f"warning: server pid {pid} on {host} left behind by an earlier driver "
                     "cannot be checked from here (it dies with its Ray actor's node process)")
            elif kill_recorded(pid, pgid, started):
                echo(f"killed server pid {pid} left behind by an earlier driver")
            self.ledger.server_stopped(server_id)
        stale = self.ledger.mark_running_interrupted("driver stopped while the cell ran")
        if stale:
            echo(f"{stale} cell(s) were running when an earlier driver stopped: "
                 "marked interrupted")
        for note in results.reconcile(self.run_dir):
            echo(f"results: {note}")
        self.ledger.add_cells(cells)
        damage = integrity.check(self.run_dir)
        for line in self.set_aside(damage):
            echo(line)
        for note in self._follow_files():
            echo(f"ledger: {note}")

    def set_aside(self, damage: Sequence[integrity.Damage]) -> list[str]:
        """Set every damaged attempt aside (grid/store/results.py `set_aside`) and, where it was
        its cell's latest committed one, return the cell to pending so that the same command
        measures it again. One line per damaged file, then one per cell."""
        lines = [d.line(self.run_dir) for d in damage]
        latest = {cell: mine[-1] for cell, mine in results.committed_attempts(self.run_dir).items()}
        known = {r["cell_id"]: r for r in self.ledger.rows()}
        for (cell_id, attempt), files in integrity.damaged_cells(damage).items():
            results.set_aside(self.run_dir, cell_id, attempt)
            entry = known.get(cell_id)
            if latest.get(cell_id) != attempt or entry is None:
                lines.append(f"cell {cell_id}: damaged attempt {attempt} set aside")
                continue
            shown = files[0].line(self.run_dir).removeprefix("damaged: ")
            self.ledger.follow_files(cell_id, Status.PENDING, max(entry["attempts"], attempt),
                                     f"results damaged, set aside: {shown}")
            lines.append(f"cell {cell_id}: damaged attempt {attempt} set aside; the cell runs "
                         "again")
        return lines

    def _follow_files(self) -> list[str]:
        committed: dict[str, dict[Any, Any]] = {
            str(row["cell_id"]): row for row in load_cells(self.run_dir).to_dict("records")}
        highest = results.all_attempt_numbers(self.run_dir)
        notes = []
        for entry in self.ledger.rows():
            cell_id, status, attempts = entry["cell_id"], entry["status"], entry["attempts"]
            found = committed.get(cell_id)
            if found is not None and int(found["attempt"]) >= attempts:
                file_status, file_attempt = Status(found["status"]), int(found["attempt"])
                if (status, attempts) != (file_status, file_attempt):
                    error = None if file_status == Status.DONE else found["error"]
                    self.ledger.follow_files(cell_id, file_status, file_attempt, error)
                    notes.append(f"cell {cell_id}: committed attempt {file_attempt} is "
                                 f"{file_status}; the ledger said {status} (attempt {attempts})")
            elif status in (Status.DONE, Status.FAILED):
                self.ledger.follow_files(cell_id, Status.PENDING,
                                         max(attempts, highest.get(cell_id, 0)),
                                         f"results of attempt {attempts} missing: re-run")
                notes.append(f"cell {cell_id}: the ledger said {status} but its results are "
                             "missing: it runs again")
            elif highest.get(cell_id, 0) > attempts:
                self.ledger.follow_files(cell_id, status, highest[cell_id], entry["error"])
        return notes

    # --- cells ---------------------------------------------------------------------------------
    def add_cells(self, cells: Iterable[Cell]) -> None:
        """Register cells a search's next step plans (pending; known ones keep their status)."""
        self.ledger.add_cells(cells)

    def status(self, cell_id: str) -> Status:
        return self.ledger.status(cell_id)

    def start_attempt(self, cell: Cell) -> int:
        return self.ledger.start_attempt(cell.cell_id)

    def commit(self, cell: Cell, attempt: int, outcome: CellOutcome) -> None:
        """Commit the attempt's files (atomically, grid/store/results.py), then its ledger status.
        ResultsWriteError leaves the cell running (the caller's interruption marks it)."""
        results.write_cell(self.run_dir, variant=cell.variant, workload=cell.workload,
                           cell_id=cell.cell_id, attempt=attempt, requests=outcome.requests,
                           cell_row=outcome.row, server_metrics=outcome.metrics,
                           telemetry=outcome.telemetry, turns=outcome.turns)
        self.ledger.finish(cell.cell_id, outcome.status, outcome.error, outcome.log_tail)

    def interrupted(self, cell: Cell, reason: str) -> None:
        self.ledger.finish(cell.cell_id, Status.INTERRUPTED, reason)

    def interrupt_running(self, reason: str) -> int:
        """Every cell still `running` becomes `interrupted` (the driver is leaving)."""
        return self.ledger.mark_running_interrupted(reason)

    def counts(self, cell_ids: Iterable[str]) -> dict[Status, int]:
        return self.ledger.counts(cell_ids)

    # --- what the run sends ----------------------------------------------------------------------
    def record_workloads(self, records: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """run_dir/workloads/<file>: the prompts the run sends (grid/plan/workloads.py
        `workload_records`: file name -> rows). A file is named by its content's digest, so
        one that exists already holds these rows and is left alone; a new one is fsynced,
        since a torn file would then be kept by every later start."""
        folder = self.run_dir / "workloads"
        for name, rows in records.items():
            path = folder / name
            if not path.exists():
                make_dirs(folder)
                write_jsonl(path, rows, fsync=True)

    # --- servers -------------------------------------------------------------------------------
    def server_started(self, server_key: str, pid: int, pgid: int, host: str | None = None,
                       create_time: float | None = None) -> int:
        return self.ledger.server_started(server_key, pid, pgid, host, create_time)

    def server_stopped(self, server_id: int) -> None:
        self.ledger.server_stopped(server_id)
