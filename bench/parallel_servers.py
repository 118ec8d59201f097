"""Wall time of a grid with server groups one after another vs in parallel, on a Ray cluster
of fake 8-GPU nodes (ray.cluster_utils.Cluster, the simulator as the engine).

Two grids, each run as `python -m grid.run`'s `run()` joined to the cluster (cluster=ray):
- concurrency: `+sweep=concurrency` reduced to c=1,8,32 with 32 output tokens (2 groups);
- tp1x8: eight TP1 variants (variant.env.NCCL_MIN_NCHANNELS=1..8, i.e. 8 server groups), one
  cell each at c=4.
Each on one node with grid.max_parallel_servers 1 (the default) and 8 (exclusive_node=false:
servers packed on the node's GPUs), and on two nodes with one server per node
(exclusive_node=true, max_parallel_servers=2). One process per cluster size (a process joins
one Ray instance in its life).

    python bench/parallel_servers.py            # the whole table, ~5 minutes on 2 cores

Recorded numbers: docs/cluster.md "Speed-up" (wall time includes server start-up, the cells
and the run's report; every fake node shares this machine's cores, so parallel servers overlap
start-up and modelled GPU time, not compute).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRIDS = {
    "concurrency": ["+sweep=concurrency", "grid.axes.concurrency=[1,8,32]",
                    "workload.max_new_tokens=32", "load.requests_per_stream=2"],
    "tp1x8": ["+sweep=smoke", "grid.axes.variant=[baseline]", "grid.axes.concurrency=[4]",
              "variant.env.NCCL_MIN_NCHANNELS=1,2,3,4,5,6,7,8", "load.num_requests=8"],
}
SETTINGS = {
    1: [("max_parallel_servers=1", ["grid.max_parallel_servers=1"]),
        ("max_parallel_servers=8, packed", ["grid.max_parallel_servers=8",
                                            "grid.exclusive_node=false"])],
    2: [("2 nodes, one server per node", ["grid.max_parallel_servers=2"])],
}


def child(nodes: int, out: Path) -> None:
    """Start a cluster of `nodes` 8-GPU nodes, run every grid under every setting, print one
    JSON line per run."""
    import ray
    from ray.cluster_utils import Cluster

    from grid.loader import load_cells
    from grid.run import run

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    for _ in range(nodes):
        cluster.add_node(num_cpus=8, num_gpus=8)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    for grid, overrides in GRIDS.items():
        for n, (label, setting) in enumerate(SETTINGS[nodes]):
            folder = out / f"{grid}-{nodes}node-{n}"
            started = time.monotonic()
            outcome = run([*overrides, *setting, "cluster=ray",
                           f"cluster.address={cluster.address}", "load.client_cpus=0.5",
                           "run.telemetry_interval_s=null", f"results_dir={folder}"],
                          echo=lambda _: None)
            wall = time.monotonic() - started
            cells = load_cells(outcome.run_dir)
            print(json.dumps({"grid": grid, "nodes": nodes, "setting": label, "wall_s": wall,
                              "exit": outcome.exit_code, "cells": len(cells),
                              "done": int((cells.status == "done").sum()),
                              "servers": int(cells.server_key.nunique())}), flush=True)
    ray.shutdown()
    cluster.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.out)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="specgrid-bench-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("RAY_ADDRESS", None)
        for nodes in (1, 2):
            proc = subprocess.run([sys.executable, __file__, "--child", str(nodes), "--out",
                                   tmp], capture_output=True, text=True, env=env, timeout=600)
            found = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not found:
                sys.exit(f"cluster of {nodes} node(s) failed:\n{proc.stderr[-3000:]}")
            rows += found
    print("| grid | nodes | setting | servers | cells done | wall s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['grid']} | {r['nodes']} | {r['setting']} | {r['servers']} | "
              f"{r['done']}/{r['cells']} | {r['wall_s']:.1f} |")
    print(f"\nload average after the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
