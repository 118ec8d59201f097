"""Driver for tests/grid/execute/test_multinode.py, run in its own process (it needs Ray clusters of
its own): one ray.cluster_utils.Cluster (a head without GPUs and two nodes of 8 logical GPUs)
shared by every scenario; each scenario is one `grid.run` command. Prints one JSON line with
what the test checks."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster

from grid.loader import load_cells
from grid.run import run

out = Path(sys.argv[1])
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
nodes = [cluster.add_node(num_cpus=3, num_gpus=8) for _ in range(2)]
cluster.wait_for_nodes()
result: dict[str, Any] = {"cluster_nodes": [n.node_id for n in cluster.list_all_nodes()]}
SMOKE = ["+sweep=smoke", "grid.axes.concurrency=[1]", "load.num_requests=12"]


def cells(run_dir: Path) -> list[dict[str, Any]]:
    frame = load_cells(run_dir)
    keep = ["variant", "status", "error", "node_id", "gpu_ids", "started_at", "finished_at",
            "server_key"]
    return [{k: (row[k] if k in row else None) for k in keep}
            for row in frame.to_dict("records")]


def go(name: str, *overrides: str) -> dict[str, Any]:
    stderr, lines = io.StringIO(), []
    with contextlib.redirect_stderr(stderr):
        outcome = run([*SMOKE, f"results_dir={out / name}", *overrides], echo=lines.append)
    found = {"exit": outcome.exit_code, "stderr": stderr.getvalue(), "out": lines[-30:],
             "folder_exists": (out / name).exists()}
    if outcome.run_dir is not None and outcome.exit_code != 2:
        found["cells"] = cells(outcome.run_dir)
    return found


# 1. cluster=local while a cluster runs here and RAY_ADDRESS points at it: a private instance
# (the command in a process of its own: one process joins one Ray instance in its life).
local = subprocess.run(
    [sys.executable, "-m", "grid.run", *SMOKE, f"results_dir={out / 'local'}",
     "grid.axes.variant=[baseline]", "cluster.num_cpus=2", "run.id=local"],
    env={**os.environ, "RAY_ADDRESS": cluster.address}, capture_output=True, text=True,
    timeout=240)
result["local"] = {"exit": local.returncode, "out": local.stdout[-3000:] + local.stderr[-3000:],
                   "cells": cells(out / "local" / "local") if local.returncode == 0 else []}

# 2. Join it: two TP1 groups, exclusive nodes (the default), two at a time.
result["join"] = go("join", "cluster=ray", f"cluster.address={cluster.address}",
                    "grid.max_parallel_servers=2")
# Where every actor of the runs so far ran (Ray's actor table keeps the dead ones).
actors = ray._private.state.actors()  # noqa: SLF001 - the table Ray's own tools read
result["join"]["actors"] = [{"name": a.get("Name", ""), "node_id": a["Address"]["NodeID"]}
                            for a in actors.values()]

# 3. A TP8 variant: one node, all eight GPUs.
result["tp8"] = go("tp8", "cluster=ray", f"cluster.address={cluster.address}",
                   "grid.axes.variant=[baseline]", "variant.tp_size=8")

# 4. Packed: four TP4 groups at once on two 8-GPU nodes (exclusive_node=false).
result["packed"] = go("packed", "cluster=ray", f"cluster.address={cluster.address}",
                      "grid.exclusive_node=false", "grid.max_parallel_servers=4",
                      "variant.tp_size=4", "variant.env.NCCL_ALGO=Ring,Tree",
                      "load.client_cpus=0.5")

# 5. More GPUs than any node has (16 = the cluster's total): refused before anything starts.
result["impossible"] = go("impossible", "cluster=ray", f"cluster.address={cluster.address}",
                          "variant.tp_size=16")

# 6. An interpreter that no node has: the group's cells fail with the reason.
result["no_python"] = go("no_python", "cluster=ray", f"cluster.address={cluster.address}",
                         "grid.axes.variant=[baseline]", "engine.python=/nonexistent/bin/python")

# 7. Load generators wanting more CPUs than any node has (3 each): refused before any placement
# group, instead of a placement that waits forever.
result["too_few_cpus"] = go("too_few_cpus", "cluster=ray", f"cluster.address={cluster.address}",
                            "grid.axes.variant=[baseline]", "load.client_cpus=4",
                            "grid.max_parallel_servers=2")

print(json.dumps(result, default=str))
sys.stdout.flush()
ray.shutdown()
cluster.shutdown()
