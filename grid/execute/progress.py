"""Live progress of a running grid: cells done/total with an ETA that learns from finished
cells, the current cell's requests done, tokens/s and errors, and a server's start-up phase.

On a terminal this is a rich live display (messages print above it); otherwise (CI, logs, a
pipe) every event is one plain line. The driver calls the event methods; nothing here knows
Ray or servers."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as RichProgress


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Eta:
    """Remaining time: the plan's per-cell estimates of the cells not yet done, scaled by how
    long the finished cells really took against their estimates (the mean duration of
    finished cells when there are no estimates)."""

    def __init__(self, estimates: Sequence[float] | None, total: int) -> None:
        self.estimates = list(estimates) if estimates else None
        self.total = total
        self.done: list[tuple[int, float]] = []

    def finished(self, index: int, seconds: float) -> None:
        self.done.append((index, seconds))

    def remaining_s(self, running_elapsed: float = 0.0) -> float | None:
        left = [i for i in range(self.total) if i not in {j for j, _ in self.done}]
        if not left:
            return 0.0
        if self.estimates:
            planned = sum(self.estimates[i] for i, _ in self.done)
            scale = (sum(s for _, s in self.done) / planned) if self.done and planned else 1.0
            return max(0.0, sum(self.estimates[i] for i in left) * scale - running_elapsed)
        if not self.done:
            return None
        mean = sum(s for _, s in self.done) / len(self.done)
        return max(0.0, mean * len(left) - running_elapsed)


class Progress:
    """Context manager; `echo` prints a message (above the live display on a terminal)."""

    def __init__(self, total_cells: int, estimates: Sequence[float] | None = None,
                 stream: IO[str] | None = None, live: bool | None = None,
                 echo: Callable[[str], None] | None = None) -> None:
        """`live`: None = a live display when `stream` (stdout) is a terminal. `echo`:
        where plain lines go (default: print to `stream`)."""
        self.stream = stream or sys.stdout
        self._plain = echo
        self.live = self.stream.isatty() if live is None else live
        self.total = total_cells
        self.eta = Eta(estimates, total_cells)
        self.cells_done = 0
        self.cell: dict[str, Any] | None = None
        self.phase: str | None = None
        self._live: Live | None = None
        if self.live:
            self.console = Console(file=self.stream)
            self._bars = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                      console=self.console)
            self._grid_task = self._bars.add_task("cells", total=total_cells, info="")
            self._cell_task = self._bars.add_task("requests", total=None, info="",
                                                  visible=False)

    def __enter__(self) -> Progress:
        if self.live:
            self._live = Live(Group(self._bars), console=self.console, refresh_per_second=4,
                              transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    # --- events ---------------------------------------------------------------------------
    def echo(self, line: str) -> None:
        if self.live:
            self.console.print(line, markup=False, highlight=False)
        elif self._plain is not None:
            self._plain(line)
        else:
            print(line, file=self.stream, flush=True)

    def cell_started(self, index: int, name: str, num_requests: int,
                     unit: str = "requests") -> None:
        """`num_requests`: what the cell will send (a conversation cell's rounds, `unit`
        "rounds")."""
        self.cell = {"index": index, "name": name, "total": num_requests, "done": 0,
                     "tokens": 0, "errors": 0, "started": time.monotonic()}
        self.phase = None
        if self.live:
            # No total until the first request count arrives: a pulsing bar, not a stuck 0/n.
            self._bars.update(self._cell_task, description=name, total=None, completed=0,
                              visible=True, info=f"{num_requests} {unit}")
            self._refresh()
        else:
            self.echo(f"[{self.cells_done + 1}/{self.total}] {name}: started "
                      f"({num_requests} {unit})")

    def cell_requests(self, done: int, output_tokens: int, errors: int) -> None:
        """Requests (rounds) finished so far in the current cell (live display only: one line per
        update would flood a log)."""
        if self.cell is None:
            return
        self.cell.update(done=done, tokens=output_tokens, errors=errors)
        if self.live:
            elapsed = max(time.monotonic() - self.cell["started"], 1e-9)
            self._bars.update(self._cell_task, completed=done, total=self.cell["total"],
                              info=f"{output_tokens / elapsed:.0f} tok/s, {errors} errors")
            self._refresh()

    def server_phase(self, name: str, phase: str) -> None:
        self.phase = f"server {name}: {phase}"
        if self.live:
            self._bars.update(self._cell_task, visible=True, description=self.phase,
                              total=None, info="")
            self._refresh()
        else:
            self.echo(self.phase)

    def cell_finished(self, index: int, name: str, status: str, seconds: float,
                      summary: str = "") -> None:
        self.cells_done += 1
        self.eta.finished(index, seconds)
        self.cell = None
        eta = _duration(self.eta.remaining_s())
        line = (f"[{self.cells_done}/{self.total}] {name}: {status} in {seconds:.1f} s"
                + (f" — {summary}" if summary else "") + f"; ETA {eta}")
        if self.live:
            self.console.print(line, markup=False, highlight=False)
            self._bars.update(self._cell_task, visible=False)
            self._refresh()
        else:
            self.echo(line)

    def _refresh(self) -> None:
        running = time.monotonic() - self.cell["started"] if self.cell else 0.0
        self._bars.update(self._grid_task, completed=self.cells_done,
                          info=f"ETA {_duration(self.eta.remaining_s(running))}")
