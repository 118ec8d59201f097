"""Multi-node placement on a real Ray cluster of fake nodes (ray.cluster_utils.Cluster: a head
without GPUs and two nodes of 8 logical GPUs), the simulator as the engine. One cluster serves
every test of the module: tests/grid/execute/multinode_driver.py runs each scenario as one
command in its own process and reports what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from grid.run import EXIT_BAD_INPUT, EXIT_FAILED_CELLS

DRIVER = Path(__file__).with_name("multinode_driver.py")
ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("multinode")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, str(DRIVER), str(out)], capture_output=True,
                          text=True, timeout=480, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _done(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    assert scenario["exit"] == 0, scenario["out"]
    cells = scenario["cells"]
    assert cells and all(c["status"] == "done" for c in cells), cells
    return list(cells)


def test_cluster_local_starts_its_own_ray_even_with_a_cluster_running(scenarios):
    """RAY_ADDRESS points at the running cluster; cluster=local still starts a private one."""
    cells = _done(scenarios["local"])
    assert not {c["node_id"] for c in cells} & set(scenarios["cluster_nodes"])


def test_joined_cluster_runs_two_groups_at_once_on_different_nodes(scenarios):
    cells = _done(scenarios["join"])
    assert {c["node_id"] for c in cells} <= set(scenarios["cluster_nodes"])
    a, b = sorted(cells, key=lambda c: c["variant"])
    assert a["node_id"] != b["node_id"]  # exclusive_node: one server per node
    assert a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]


def test_load_generators_run_on_their_servers_node(scenarios):
    nodes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for actor in scenarios["join"]["actors"]:
        # specgrid-<role>-<server key>-r<repeat>-<unique>
        parts = actor["name"].split("-")
        if len(parts) == 5 and parts[0] == "specgrid":
            nodes[f"{parts[2]}-{parts[3]}"][parts[1]].add(actor["node_id"])
    assert len(nodes) == 2, scenarios["join"]["actors"]
    for roles in nodes.values():
        assert roles["loadgen0"] and roles["loadgen0"] == roles["server"]


def test_tp8_variant_is_never_split(scenarios):
    (cell,) = _done(scenarios["tp8"])
    assert cell["node_id"] in scenarios["cluster_nodes"]
    assert sorted(cell["gpu_ids"].split(",")) == [str(i) for i in range(8)]


def test_packed_servers_share_a_node_on_disjoint_gpus(scenarios):
    """exclusive_node=false, four TP4 groups at once on two 8-GPU nodes: two per node."""
    cells = _done(scenarios["packed"])
    assert len(cells) == 4
    starts, ends = max(c["started_at"] for c in cells), min(c["finished_at"] for c in cells)
    assert starts < ends  # all four ran at the same time
    by_node: dict[str, list[set[str]]] = defaultdict(list)
    for c in cells:
        by_node[c["node_id"]].append(set(c["gpu_ids"].split(",")))
    assert sorted(len(v) for v in by_node.values()) == [2, 2]
    for first, second in by_node.values():
        assert len(first) == len(second) == 4 and not first & second


def test_impossible_placement_fails_in_the_plan(scenarios):
    found = scenarios["impossible"]
    assert found["exit"] == EXIT_BAD_INPUT
    assert found["stderr"] == ("specgrid: error: variant baseline needs 16 GPUs on one node but "
                               "the largest node of the Ray cluster has 8 (nodes: 8, 8, 0)\n")
    assert not found["folder_exists"]  # nothing started, no results folder


def test_missing_engine_python_on_the_node_fails_the_groups_cells(scenarios):
    found = scenarios["no_python"]
    assert found["exit"] == EXIT_FAILED_CELLS
    (cell,) = found["cells"]
    assert cell["status"] == "failed"
    assert cell["error"].startswith("/nonexistent/bin/python does not exist on node ")


def test_a_cluster_too_small_for_a_group_fails_in_one_line_before_placing(scenarios):
    found = scenarios["too_few_cpus"]
    assert found["exit"] == 2, found
    lines = [ln for ln in found["stderr"].splitlines() if ln.strip()]
    assert len(lines) == 1 and "no node of the Ray cluster has both" in lines[0], lines
    assert "4.01 CPUs" in lines[0] and "8 GPUs + 3 CPUs" in lines[0]
