"""A server that stops answering mid-cell, beside a healthy server group running at the same
time: the hung cell fails within its stated bound (no progress for its stall bound; then its
load generator cancels the stuck load and stays, and the end of the cell asks the server once:
recorded within the bound + 10 s), the healthy group never waits on it, the run exits 3, and
running the same command again resumes it (the healthy group's done cell is not run again).
Real Ray, real simulators; the hang is the simulator's own (`--sim-hang-after-requests`: no
byte to any connection, /health included)."""

from __future__ import annotations

import time

import pytest

import grid.execute.stall
from grid.execute.server import LaunchedServer
from grid.execute.stall import PROGRESS_INTERVAL_S, LoadTimeout, Stall, StallWatch
from grid.loader import load_cells
from grid.run import EXIT_FAILED_CELLS
from tests.grid.execute.smoke_runs import STATED, assert_no_orphans, ledger_rows, run_smoke

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]

CALL_TIMEOUT_S = 20.0
MARGIN_S = 5.0
REQUEST_TIMEOUT_S = 2.0
STALL_S = REQUEST_TIMEOUT_S + 0.0 + MARGIN_S  # a closed loop waits for nothing else
SLACK_S = 2 * PROGRESS_INTERVAL_S + 3.0
"""Beyond a bound: a poll interval to notice it, the controller's wait, recording the cell."""
RECORDED_S = 10.0
"""A hung cell is recorded within its stall bound + this, from its last progress: the
clients' cancel (seconds at most) and the end of the cell (one /health probe of 5 s)."""
OVERRIDES = [
    "grid.max_parallel_servers=2", "grid.exclusive_node=false", "load.client_cpus=0.5",
    "grid.axes.concurrency=[1]", "load.num_requests=100", "load.warmup_requests=1",
    f"load.request_timeout_s={REQUEST_TIMEOUT_S:g}", f"run.call_timeout_s={CALL_TIMEOUT_S:g}",
    # two server groups: one that hangs after its 8th request, one that never does
    "engine.options.hang_after_requests=100000,8",
]


def _watched(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Record every LoadTimeout (its Stall, monotonic and epoch time), every progress poll
    (monotonic) and every end-of-cell call that reached a server's actor (monotonic start
    and end)."""
    seen: dict[str, list] = {"timeouts": [], "polls": [], "ends": []}
    check, poll, end_cell = Stall.check, StallWatch.poll, LaunchedServer.end_cell

    def checked(self: Stall, now: float) -> None:
        try:
            check(self, now)
        except LoadTimeout:
            seen["timeouts"].append((self, now, time.time()))
            raise

    def polled(self: StallWatch) -> dict[str, int] | None:
        seen["polls"].append(time.monotonic())
        return poll(self)

    def ended(self: LaunchedServer, timeout_s: float):
        asked = self.dead is None and self.hung is None
        started = time.monotonic()
        end = yield from end_cell(self, timeout_s)
        if asked:
            seen["ends"].append((started, time.monotonic(), end))
        return end

    monkeypatch.setattr(grid.execute.stall, "STALL_MARGIN_S", MARGIN_S)
    monkeypatch.setattr(Stall, "check", checked)
    monkeypatch.setattr(StallWatch, "poll", polled)
    monkeypatch.setattr(LaunchedServer, "end_cell", ended)
    return seen


def test_a_hung_server_fails_its_cell_in_bound_while_the_other_group_runs_on(tmp_path,
                                                                              monkeypatch):
    seen = _watched(monkeypatch)
    outcome, out = run_smoke(tmp_path, *OVERRIDES)
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    cells = load_cells(outcome.run_dir)
    healthy = cells[~cells.engine_options.str.contains('"hang_after_requests": 8')]
    hung = cells[cells.engine_options.str.contains('"hang_after_requests": 8')]
    assert healthy.status.tolist() == ["done"]
    assert hung.status.tolist() == ["failed"]
    stated = STATED.fullmatch(hung.error.iloc[0])
    assert stated is not None, hung.error.iloc[0]
    assert (stated["bound"], stated["timeout"], stated["margin"]) == (
        f"{STALL_S:g}", f"{REQUEST_TIMEOUT_S:g}", f"{MARGIN_S:g}")

    # The stated bound: no progress for the stall bound; then the load generator cancels the
    # stuck load (it is not replaced) and the end of the cell asks the server once: the cell
    # is recorded within the bound + 10 s of its last progress.
    ((stall, failed_at, failed_epoch),) = seen["timeouts"]
    assert STALL_S <= failed_at - stall.last_progress <= STALL_S + SLACK_S
    last_progress_epoch = failed_epoch - (failed_at - stall.last_progress)
    recorded = hung.finished_at.iloc[0] - last_progress_epoch
    assert recorded <= STALL_S + RECORDED_S
    # ...and the line's own parts add up to the cell's time (its progress line's "failed in"):
    # the bound counted from a time into the cell, its failure, the rest
    took = hung.finished_at.iloc[0] - hung.started_at.iloc[0]
    since, failed, later = (float(stated[k]) for k in ("since", "failed", "later"))
    assert took <= since + STALL_S + RECORDED_S
    assert failed + later == pytest.approx(took, abs=0.1) and later <= RECORDED_S
    assert "replaced" not in out
    # The hung server's end-of-cell call waited out its /health probe (it answers no byte)...
    ((t0, t1, end),) = [e for e in seen["ends"] if e[2].hung]
    assert t1 - t0 >= 4.0 and end.hung.startswith("server does not answer")
    # ...and meanwhile the healthy group's load was polled as usual: the controller never
    # stood still for it (before, a blocking call there stopped every group for as long).
    assert healthy.started_at.iloc[0] < failed_epoch < healthy.finished_at.iloc[0]
    during = [t0, *[t for t in seen["polls"] if t0 < t < t1], t1]
    gap = max(b - a for a, b in zip(during, during[1:], strict=False))
    print(f"no progress for {failed_at - stall.last_progress:.1f} s (bound {STALL_S:g} s); "
          f"recorded {recorded:.1f} s after the last progress (bound {STALL_S:g} + "
          f"{RECORDED_S:g} s); the end-of-cell call took {t1 - t0:.1f} s, the healthy "
          f"group's longest poll gap meanwhile {gap:.1f} s; healthy cell "
          f"{healthy.duration_s.iloc[0]:.1f} s")
    assert gap <= 3.0, during
    # The hung server was stopped (not left for the group's next cell): its process is gone.
    assert_no_orphans(outcome.run_dir)

    # The same command again resumes: the done cell is skipped (its server never starts
    # again), the failed one runs again and fails the same way.
    servers = len(ledger_rows(outcome.run_dir, "SELECT id FROM servers"))
    again, out = run_smoke(tmp_path, *OVERRIDES)
    assert again.exit_code == EXIT_FAILED_CELLS, out
    assert len(ledger_rows(outcome.run_dir, "SELECT id FROM servers")) == servers + 1
    attempts = dict(ledger_rows(outcome.run_dir, "SELECT cell_id, attempts FROM cells"))
    assert attempts[healthy.cell_id.iloc[0]] == 1 and attempts[hung.cell_id.iloc[0]] == 2
    assert_no_orphans(outcome.run_dir)
