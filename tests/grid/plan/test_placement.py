"""Cluster settings and server placement checked before anything starts (grid/plan/placement.py,
grid/plan/build.py, grid/execute/cluster.py's runtime_env); no Ray."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from grid.execute.cluster import runtime_env
from grid.plan.config import ConfigError
from grid.plan.placement import bundle_gpus, check_node_resources, check_nodes, fits_together
from grid.run import EXIT_BAD_INPUT, make_plan, run

ROOT = Path(__file__).resolve().parents[3]


def _groups(*tps: int, engine: str = "sim") -> list[Any]:
    """Stand-ins with the fields of a ServerGroup that placement reads."""
    class G:
        def __init__(self, tp: int) -> None:
            self.tp_size, self.variant = tp, f"tp{tp}"
            self.config = {"engine": {"name": engine}}
    return [G(tp) for tp in tps]


@pytest.mark.parametrize(("overrides", "message"), [
    (["cluster.address=127.0.0.1:6379"],
     "cluster.address=127.0.0.1:6379 joins a running Ray cluster: use cluster=ray"),
    (["cluster=ray", "cluster.address=null"], "cluster=ray needs cluster.address"),
    (["cluster.kind=slurm"], "cluster.kind='slurm' is not one of local, ray"),
])
def test_bad_cluster_settings_are_one_line(overrides, message, tmp_path, capsys):
    outcome = run(["+sweep=smoke", *overrides, f"results_dir={tmp_path / 'r'}"],
                  echo=lambda _: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "r").exists()


def test_cluster_ray_defaults_to_auto_and_plans_without_a_local_gpu_count(tmp_path):
    planned = make_plan(["+sweep=smoke", "cluster=ray", f"results_dir={tmp_path}"])
    assert planned.cfg.cluster.kind == "ray" and planned.cfg.cluster.address == "auto"
    assert planned.plan.cluster_gpus is None  # known once joined
    assert planned.plan.exclusive_node is True


def test_a_server_larger_than_every_node_is_refused():
    with pytest.raises(ConfigError, match="variant tp16 needs 16 GPUs on one node but the "
                       r"largest node of the Ray cluster has 8 \(nodes: 8, 8, 0\)"):
        check_nodes(_groups(8, 16), [0, 8, 8])
    check_nodes(_groups(8, 4), [0, 8, 8])  # fits
    check_nodes(_groups(16, engine="external"), [8])  # nothing launched, nothing placed


def test_exclusive_bundles_take_a_whole_node_packed_ones_their_tp():
    assert bundle_gpus(1, [0, 8, 8], exclusive_node=True) == 8
    assert bundle_gpus(4, [0, 4, 8], exclusive_node=True) == 4  # the smallest node that fits
    assert bundle_gpus(1, [0, 8, 8], exclusive_node=False) == 1
    assert bundle_gpus(4, [], exclusive_node=True) == 4  # nodes unknown: its own GPUs


def test_a_source_checkout_ships_as_working_dir_without_results_or_venvs(tmp_path):
    env = runtime_env()  # the tests run from a checkout, not an installed package
    assert Path(env["working_dir"]) == ROOT
    assert {".git", ".venv*", "results"} <= set(env["excludes"])
    # what Ray packs with those excludes and .gitignore off (as grid/execute/cluster.py
    # connects): the load generator's compiled module goes along, environments and results do not
    from ray._private.runtime_env.packaging import create_package

    create_package(str(ROOT), tmp_path / "pkg.zip", include_gitignore=False,
                   excludes=env["excludes"])
    names = zipfile.ZipFile(tmp_path / "pkg.zip").namelist()
    assert any(n.startswith("actors/loadgen/_native_scan") and n.endswith(".so") for n in names)
    assert not [n for n in names if n.startswith((".venv", "results/", ".git/"))
                or "__pycache__" in n or ".egg-info" in n]


def test_the_plan_shows_the_placement_and_never_the_api_key(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "plan=true", "grid.max_parallel_servers=2",
                   "grid.exclusive_node=false", "engine.api_key=sk-plan-secret",
                   f"results_dir={tmp_path}"], echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0
    assert ("placement: 2 server group(s) at a time, servers packed on GPU subsets of a node "
            "(grid.exclusive_node=false)") in text
    assert "sk-plan-secret" not in text and "--api-key '***'" in text


def test_a_group_no_single_node_can_hold_is_refused_before_any_placement():
    """Two nodes of 1 CPU and 8 GPUs each: a server and one load generator of 1 CPU need more
    than either node has, so the placement group could never be placed (it used to wait
    forever)."""
    groups = _groups(1)
    groups[0].config["load"] = {"clients": 1, "client_cpus": 1.0}
    with pytest.raises(ConfigError, match=r"variant tp1 needs 1 GPU\(s\) and 1.01 CPUs on one "
                       r"node .* no node of the Ray cluster has both \(nodes: 8 GPUs \+ 1 "
                       r"CPUs, 8 GPUs \+ 1 CPUs\)"):
        check_node_resources(groups, [(8, 1.0), (8, 1.0)], server_cpu=0.01)
    check_node_resources(groups, [(8, 1.0), (8, 4.0)], server_cpu=0.01)  # one node fits
    groups[0].config["engine"]["name"] = "external"  # nothing launched: its clients only
    check_node_resources(groups, [(0, 1.0)], server_cpu=0.01)


def test_fits_together_packs_each_group_on_one_node():
    server = [{"GPU": 1, "CPU": 0.01}, {"CPU": 0.5}]  # one GPU, one client of half a CPU
    whole = [{"GPU": 8, "CPU": 0.01}, {"CPU": 1.0}]   # an exclusive server on an 8-GPU node
    # two TP1 servers beside each other on one 8-GPU, 2-CPU node: 2 GPUs, 1.02 CPUs
    assert fits_together([server, server], [(8, 2.0)])
    # their clients at 1 CPU each: 2.02 CPUs do not fit on 2
    assert not fits_together([[server[0], {"CPU": 1.0}]] * 2, [(8, 2.0)])
    # exclusive servers take a node each: two need two nodes
    assert not fits_together([whole, whole], [(8, 4.0)])
    assert fits_together([whole, whole], [(8, 4.0), (8, 4.0)])
    # a group is never split across nodes: 6 + 6 GPUs on two 8-GPU nodes, not 12 on one
    six = [{"GPU": 6, "CPU": 0.01}]
    assert fits_together([six, six], [(8, 1.0), (8, 1.0)])
    assert not fits_together([six, six, six], [(8, 1.0), (8, 1.0)])
