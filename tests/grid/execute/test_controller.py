"""Failure isolation through real Ray, real simulator processes and real Parquet: an actor
killed mid-cell (as Ray's OOM killer or a lost node would), a failing spec, repeated start
failures — each fails one cell, and the run goes on."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import ray

from grid.execute.server import LaunchedServer
from grid.loader import load_cells
from grid.plan.work import PlannedCell
from grid.run import EXIT_FAILED_CELLS
from tests.grid.execute.smoke_runs import assert_no_orphans, ledger_rows, run_smoke, served_starts

pytestmark = pytest.mark.usefixtures("ray_session")


def _kill_mid_first_cell(role: str, killed: list[str]) -> threading.Thread:
    """Once the first cell's load generator exists (its server is ready and the load about to
    start), wait a moment and ray.kill the named actor of `role` (server or loadgen0)."""

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            names = ray.util.list_named_actors()
            if any(n.startswith("specgrid-loadgen0-") for n in names):
                time.sleep(1.0)  # mid-cell: 30 requests at c=1 take several seconds
                victim = next(n for n in names if n.startswith(f"specgrid-{role}-"))
                ray.kill(ray.get_actor(victim))
                killed.append(victim)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_killed_server_actor_fails_its_cell_and_the_next_runs_on_a_relaunched_server(tmp_path):
    killed: list[str] = []
    thread = _kill_mid_first_cell("server", killed)
    outcome, out = run_smoke(tmp_path, "load.num_requests=30")
    thread.join(timeout=5)
    assert killed, out
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    rows = ledger_rows(outcome.run_dir, "SELECT status, error FROM cells ORDER BY rowid")
    assert rows[0][0] == "failed" and "died" in rows[0][1], rows
    assert rows[1] == ("done", None)
    servers = ledger_rows(outcome.run_dir, "SELECT stopped_at FROM servers")
    assert len(servers) == 2 and all(stopped is not None for (stopped,) in servers)
    cells = load_cells(outcome.run_dir)
    assert sorted(cells.status) == ["done", "failed"]
    assert cells[cells.status == "failed"].server_command.str.contains("engines.sim").all()
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_killed_load_generator_fails_its_cell_and_leaves_the_server_alone(tmp_path):
    killed: list[str] = []
    thread = _kill_mid_first_cell("loadgen0", killed)
    outcome, out = run_smoke(tmp_path, "load.num_requests=30")
    thread.join(timeout=5)
    assert killed, out
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    rows = ledger_rows(outcome.run_dir, "SELECT status, error FROM cells ORDER BY rowid")
    assert rows[0][0] == "failed" and rows[0][1].startswith("load generator died"), rows
    assert rows[1] == ("done", None)
    assert len(served_starts(outcome.run_dir)) == 1  # not relaunched
    assert "load generator 0 of baseline replaced" in out
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_any_exception_in_a_cell_fails_only_that_cell(tmp_path, monkeypatch):
    real = PlannedCell.at
    calls = {"n": 0}

    def first_one_breaks(work, *server):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("invalid LoadSpec: something the plan could not know")
        return real(work, *server)

    monkeypatch.setattr(PlannedCell, "at", first_one_breaks)
    outcome, out = run_smoke(tmp_path)
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    rows = ledger_rows(outcome.run_dir, "SELECT status, error FROM cells ORDER BY rowid")
    assert rows[0] == ("failed", "ValueError: invalid LoadSpec: something the plan could "
                                 "not know")
    assert rows[1] == ("done", None)
    assert len(served_starts(outcome.run_dir)) == 1  # server was healthy
    assert not ledger_rows(outcome.run_dir, "SELECT 1 FROM cells WHERE status='running'")


@pytest.mark.slow
def test_server_starts_are_retried_up_to_max_server_starts(tmp_path):
    outcome, out = run_smoke(tmp_path, "grid.axes.concurrency=[1,2,4]",
                             "engine.options.startup_seconds=600", "engine.ready_timeout_s=2")
    assert outcome.exit_code == EXIT_FAILED_CELLS
    errors = [e for (e,) in ledger_rows(outcome.run_dir, "SELECT error FROM cells ORDER BY rowid")]
    assert "not ready after 2 s" in errors[0] and "not ready after 2 s" in errors[1]
    assert errors[2].startswith("server did not start (2 attempt(s), run.max_server_starts=2)")
    assert len(ledger_rows(outcome.run_dir, "SELECT id FROM servers")) == 2  # default: 2 starts
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
def test_a_port_taken_before_the_server_binds_it_starts_the_server_again(tmp_path, monkeypatch):
    """Another process takes the server's port between its launch and its bind (an outgoing
    connection was seen to take SGLang's that way): the server starts again on new ports, not
    as a failed start, and every cell runs. The port is taken by a real listening socket, the
    simulator's bind fails for real."""
    real_launch = LaunchedServer.launch.__func__  # type: ignore[attr-defined]
    thieves: list[socket.socket] = []

    def launch_and_take_the_first_port(cls, spec, **kwargs):
        server = yield from real_launch(cls, spec, **kwargs)
        if not thieves:  # the simulator is still importing: it binds a second or so later
            thief = socket.socket()
            thief.bind(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
            thief.listen()
            thieves.append(thief)
        return server

    monkeypatch.setattr(LaunchedServer, "launch", classmethod(launch_and_take_the_first_port))
    try:
        outcome, out = run_smoke(tmp_path, "run.max_server_starts=1")
    finally:
        for thief in thieves:
            thief.close()
    assert outcome.exit_code == 0, out
    assert len(thieves) == 1
    assert "was taken before it bound it" in out and "starting it again on new ports" in out, out
    assert (load_cells(outcome.run_dir).status == "done").all()
    assert len(ledger_rows(outcome.run_dir, "SELECT id FROM servers")) == 2
    assert_no_orphans(outcome.run_dir)
