"""Starting or joining Ray for a run. A local cluster advertises the plan's GPUs (logical ones
for the simulator); a joined cluster is checked against the plan before any server starts."""

from __future__ import annotations

import os

import ray
from omegaconf import DictConfig

from grid.config import ConfigError
from grid.plan import Plan, check_gpus


def connect(cfg: DictConfig, plan: Plan) -> None:
    if not ray.is_initialized():
        # Ray's per-actor log lines are noise here; servers log to files in the run folder.
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        if cfg.cluster.address:
            ray.init(address=cfg.cluster.address, include_dashboard=False,
                     log_to_driver=False)
        else:
            # address="local": a private instance, never a cluster that happens to run here
            # (ray.init() alone joins one found through RAY_ADDRESS or /tmp/ray).
            ray.init(address="local", num_gpus=plan.cluster_gpus, num_cpus=cfg.cluster.num_cpus,
                     include_dashboard=False, log_to_driver=False)
    total = int(ray.cluster_resources().get("GPU", 0))
    needs_gpus = any(g.config["engine"]["name"] != "external" for g in plan.groups)
    if needs_gpus and total == 0:
        raise ConfigError("the Ray cluster has no GPUs")
    check_gpus(plan.groups, total)
