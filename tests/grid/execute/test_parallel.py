"""Server groups in parallel (grid.max_parallel_servers), each in its own placement group, and
load generators with a real CPU reservation (load.client_cpus): real Ray, real simulators."""

from __future__ import annotations

import socket
import sqlite3

import pytest

from grid.loader import load_cells
from grid.run import EXIT_BAD_INPUT, run

pytestmark = pytest.mark.usefixtures("ray_session")


def _run(tmp_path, *overrides):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "load.client_cpus=0.5", f"results_dir={tmp_path}",
                   *overrides], echo=lines.append)
    return outcome, "\n".join(lines)


def _servers(run_dir):
    with sqlite3.connect(run_dir / "_ledger.sqlite") as db:
        return db.execute("SELECT server_key, started_at, stopped_at FROM servers").fetchall()


@pytest.mark.slow
def test_two_groups_run_at_the_same_time(tmp_path):
    outcome, out = _run(tmp_path, "grid.max_parallel_servers=2", "grid.exclusive_node=false",
                        "load.num_requests=12")
    assert outcome.exit_code == 0, out
    (_, start_a, stop_a), (_, start_b, stop_b) = _servers(outcome.run_dir)
    assert start_b < stop_a and start_a < stop_b  # the two servers' lives overlap
    cells = load_cells(outcome.run_dir)
    assert (cells.status == "done").all() and len(cells) == 4
    by_variant = {v: g.sort_values("started_at") for v, g in cells.groupby("variant")}
    base, eagle = by_variant["baseline"], by_variant["eagle3"]
    assert base.started_at.iloc[0] < eagle.finished_at.iloc[-1]
    assert eagle.started_at.iloc[0] < base.finished_at.iloc[-1]
    for group in by_variant.values():  # within a group, cells keep grid order
        assert group.concurrency.tolist() == [1, 4]
        assert group.finished_at.iloc[0] <= group.started_at.iloc[1]
    assert len(set(cells.cuda_visible_devices)) == 2  # each server on its own GPU
    assert len(set(cells.gpu_ids)) == 2 and cells.node_id.notna().all()
    assert (cells.hostname == socket.gethostname()).all() and cells.node_ip.notna().all()
    # Each server's log came back through its actor into the run folder.
    logs = sorted((outcome.run_dir / "logs").glob("server-*.log"))
    assert len(logs) == 2 and all("Cache flushed successfully" in p.read_text() for p in logs), logs


@pytest.mark.slow
def test_exclusive_node_keeps_one_server_per_node(tmp_path):
    """grid.exclusive_node (default true): on the one 8-GPU node of the session, two TP1
    servers with max_parallel_servers=2 still run one after the other."""
    outcome, out = _run(tmp_path, "grid.max_parallel_servers=2")
    assert outcome.exit_code == 0, out
    (_, _, stop_a), (_, start_b, _) = sorted(_servers(outcome.run_dir), key=lambda s: s[1])
    assert start_b >= stop_a


@pytest.mark.slow
def test_groups_wait_for_gpus_another_group_holds(tmp_path):
    """Two 8-GPU servers on an 8-GPU cluster with max_parallel_servers=2: the second group's
    placement waits until the first releases its GPUs, then runs (not a failure)."""
    outcome, out = _run(tmp_path, "grid.max_parallel_servers=2", "variant.tp_size=8")
    assert outcome.exit_code == 0, out
    (_, _, stop_a), (_, start_b, _) = sorted(_servers(outcome.run_dir), key=lambda s: s[1])
    assert start_b >= stop_a
    assert (load_cells(outcome.run_dir).status == "done").all()


def test_clients_no_node_can_hold_are_refused_once_the_cluster_is_known(tmp_path, capsys):
    """Two clients of 1.5 CPUs cannot be placed on the session's 2 CPUs. The plan is told of 8
    (as when the cluster differs from what it was told); once Ray is joined its real nodes
    are checked, and the run stops with one line before any placement group or server."""
    outcome, out = _run(tmp_path, "grid.axes.variant=[baseline]", "load.clients=2",
                        "load.client_cpus=1.5", "cluster.num_cpus=8")
    assert outcome.exit_code == EXIT_BAD_INPUT, out
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "needs 1 GPU(s) and 3.01 CPUs on one node" in err[0], err
    assert "no node of the Ray cluster has both" in err[0]
    assert outcome.run_dir is None or _servers(outcome.run_dir) == []
