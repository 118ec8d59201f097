"""A grid against a server someone else runs (engine=external), and one cell's load split over
several LoadGenActors."""

from __future__ import annotations

import json

import pytest

import grid.execute.controller
from grid.loader import load_cells, load_requests
from grid.run import run
from tests.engines.sim.conftest import start_sim

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.mark.slow
def test_external_server_is_benchmarked_without_launching(tmp_path):
    sim = start_sim(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"])
    try:
        outcome = run(["+sweep=smoke", "engine=external", f"engine.options.url={sim.url}",
                       "grid.axes.variant=[eagle3]", f"results_dir={tmp_path}"],
                      echo=lambda line: None)
    finally:
        sim.stop()
    assert outcome.exit_code == 0
    requests = load_requests(outcome.run_dir)
    assert len(requests) == 12 and (requests.status == "ok").all()
    assert (requests.accept_length > 1).all()
    assert not (outcome.run_dir / "logs").exists()  # nothing was launched
    cells = load_cells(outcome.run_dir)
    assert (cells.engine == "external").all() and not cells.simulated.any()


@pytest.mark.slow
def test_several_clients_give_the_same_rows_as_one(tmp_path):
    counts, prompts = {}, {}
    for clients in (1, 2):
        outcome = run(["+sweep=smoke", "grid.axes.variant=[baseline]", "grid.axes.concurrency=[4]",
                       "load.num_requests=10", f"load.clients={clients}",
                       "load.client_cpus=0.5",  # two clients and a server on 2 CPUs
                       f"run.id=clients{clients}", f"results_dir={tmp_path}"],
                      echo=lambda line: None)
        assert outcome.exit_code == 0
        requests = load_requests(outcome.run_dir)
        assert requests.request_id.is_unique
        assert (requests.status == "ok").all() and (requests.output_tokens == 16).all()
        counts[clients] = len(requests)
        prompts[clients] = sorted(requests.prompt_id)
    assert counts == {1: 10, 2: 10}
    assert prompts[1] == prompts[2]  # the same requests, split over two processes


@pytest.mark.slow
def test_api_key_is_used_and_never_recorded(tmp_path):
    outcome = run(["+sweep=smoke", "grid.axes.variant=[baseline]", "grid.axes.concurrency=[2]",
                   "engine.api_key=sk-not-for-parquet", f"results_dir={tmp_path}"],
                  echo=lambda line: None)
    assert outcome.exit_code == 0
    assert (load_requests(outcome.run_dir).status == "ok").all()
    files = [p for p in outcome.run_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("server-") for p in files)  # the server log is among them
    for path in files:  # results, run.json, the ledger, server logs, the report
        assert b"sk-not-for-parquet" not in path.read_bytes(), path
    assert "--api-key '***'" in load_cells(outcome.run_dir).server_command.iloc[0]


@pytest.mark.slow
def test_a_server_bound_beyond_loopback_runs_with_a_run_key_never_recorded(tmp_path, monkeypatch,
                                                                           capfd):
    """engine.host=0.0.0.0 without engine.api_key: the run makes a fresh key, the server gets it
    (it refuses requests without it: tests/actors/test_server_actor.py) and every client sends
    it; the key is in no file of the run folder and in nothing the run printed."""
    made: list[str] = []
    real = grid.execute.controller.token_urlsafe

    def seen(nbytes: int) -> str:  # the real generator, watched
        made.append(real(nbytes))
        return made[-1]

    monkeypatch.setattr(grid.execute.controller, "token_urlsafe", seen)
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "grid.axes.variant=[baseline]", "grid.axes.concurrency=[2]",
                   "engine.host=0.0.0.0", f"results_dir={tmp_path}"], echo=lines.append)
    assert outcome.exit_code == 0, lines
    assert len(made) == 1 and len(made[0]) >= 40
    assert (load_requests(outcome.run_dir).status == "ok").all()
    cells = load_cells(outcome.run_dir)
    assert "--host 0.0.0.0" in cells.server_command.iloc[0]
    assert "--api-key '***'" in cells.server_command.iloc[0]
    assert json.loads(cells.server_info.iloc[0])["api_key"] == "***"  # the server had a key
    files = [p for p in outcome.run_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("server-") for p in files)  # the server log is among them
    for path in files:
        assert made[0].encode() not in path.read_bytes(), path
    captured = capfd.readouterr()
    assert made[0] not in "\n".join(lines) + captured.out + captured.err


def test_the_plan_shows_which_servers_get_a_key(tmp_path):
    plans = {}
    for host in ("127.0.0.1", "0.0.0.0"):
        lines: list[str] = []
        outcome = run(["+sweep=smoke", "plan=true", "grid.axes.variant=[baseline]",
                       f"engine.host={host}", f"results_dir={tmp_path}"], echo=lines.append)
        assert outcome.exit_code == 0
        plans[host] = "\n".join(lines)
    assert "--api-key" not in plans["127.0.0.1"]
    assert ("--host 0.0.0.0" in plans["0.0.0.0"] and "--port <free port> --api-key '***' "
            "(generated for the run: the server binds beyond loopback)" in plans["0.0.0.0"])


def test_engine_host_must_be_an_ipv4_address(tmp_path, capsys):
    outcome = run(["+sweep=smoke", "engine.host=localhost", f"results_dir={tmp_path}"],
                  echo=lambda line: None)
    assert outcome.exit_code == 2
    assert not list(tmp_path.iterdir())  # nothing started, no run folder
    assert capsys.readouterr().err.strip() == (
        "specgrid: error: engine.host must be an IPv4 address (127.0.0.1, 0.0.0.0 or a node's "
        "address), got 'localhost'")
