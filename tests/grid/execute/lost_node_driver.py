"""Driver for tests/grid/execute/test_lost_node.py, run in its own process (it needs a Ray
cluster of its own): a head without GPUs and one 8-GPU node; the node is removed while the
first cell runs; then a new node joins and the same command resumes. Prints one JSON line."""

from __future__ import annotations

import json
import sys
import threading
import time

import ray
from ray.cluster_utils import Cluster

import grid.execute.group
from grid.loader import load_cells
from grid.run import run

grid.execute.group.PLACEMENT_TIMEOUT_S = 5.0  # a relaunch on the lost node gives up quickly

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
worker = cluster.add_node(num_cpus=2, num_gpus=8)
ray.init(address=cluster.address, log_to_driver=False)
command = ["+sweep=smoke", "grid.axes.variant=[baseline]", "load.num_requests=30", "run.id=r",
           "cluster=ray", f"cluster.address={cluster.address}", f"results_dir={sys.argv[1]}"]
removed: list[float] = []


def remove_node_mid_cell() -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(n.startswith("specgrid-loadgen0-") for n in ray.util.list_named_actors()):
            time.sleep(1.0)
            cluster.remove_node(worker)
            removed.append(time.time())
            return
        time.sleep(0.05)


thread = threading.Thread(target=remove_node_mid_cell, daemon=True)
thread.start()
first = run(command, echo=lambda line: None)
thread.join(timeout=5)
cells_first = load_cells(first.run_dir).sort_values("started_at")
cluster.add_node(num_cpus=2, num_gpus=8)
cluster.wait_for_nodes()
second = run(command, echo=lambda line: None)
cells_second = load_cells(second.run_dir)
print(json.dumps({
    "removed": bool(removed),
    "first_exit": first.exit_code,
    "first_errors": cells_first.error.tolist(),
    "second_exit": second.exit_code,
    "second_status": cells_second.status.tolist(),
    "second_attempts": cells_second.attempt.tolist(),
}))
sys.stdout.flush()
ray.shutdown()
cluster.shutdown()
