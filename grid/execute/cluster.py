"""Starting or joining Ray for a run. cluster=local starts a private instance that advertises
the plan's GPUs (logical ones for the simulator) and never joins a running cluster; cluster=ray
joins the cluster at cluster.address, ships the code to its workers through a `runtime_env`,
and checks the plan against its nodes before any server starts (docs/cluster.md)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sysconfig
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig

import grid
from grid.plan.build import Plan, check_gpus
from grid.plan.checks import SERVER_CPU
from grid.plan.config import ConfigError
from grid.plan.placement import check_node_resources, check_nodes, server_gpus

SOURCE_ROOT = Path(grid.__file__).resolve().parents[1]
"""The checkout (or site-packages folder) the driver's specgrid is imported from."""
WORKING_DIR_EXCLUDES = [".git", ".venv*", "results", "outputs", "**/__pycache__", "notebooks",
                        ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.parquet", "*.egg-info",
                        "build", ".whl"]
"""What of a source checkout is not shipped to the workers. Ray would also leave out whatever
.gitignore lists, which includes the load generator's compiled module (``*.so``, built in place
by ``pip install -e``): ``connect`` turns that off (``RAY_RUNTIME_ENV_IGNORE_GITIGNORE``) and
this list says what stays home instead."""


def installed() -> bool:
    """Whether specgrid is imported from an installed package (site-packages), not a checkout."""
    site = {Path(p).resolve() for p in (sysconfig.get_path("purelib"),
                                        sysconfig.get_path("platlib")) if p}
    return SOURCE_ROOT in site


def runtime_env() -> dict[str, Any]:
    """How the code reaches a joined cluster's workers: an installed specgrid is expected on
    every node (nothing shipped); a source checkout is shipped as Ray's working_dir (Ray
    uploads it once and puts it first on the workers' PYTHONPATH, which the server processes
    inherit)."""
    if installed():
        return {}
    return {"working_dir": str(SOURCE_ROOT), "excludes": WORKING_DIR_EXCLUDES}


def node_gpus() -> list[int]:
    """GPUs of each alive node of the connected cluster (nodes without GPUs included as 0)."""
    return [gpus for gpus, _ in node_resources()]


def node_resources() -> list[tuple[int, float]]:
    """(GPUs, CPUs) of each alive node of the connected cluster."""
    return [(int(n.get("Resources", {}).get("GPU", 0)), float(n.get("Resources", {}).get("CPU", 0)))
            for n in ray.nodes() if n.get("Alive")]


RAY_LOG = "specgrid-driver-ray.log"
"""The file in the Ray session's logs folder that Ray's own driver-side lines go to (its
start-up and token lines, its warnings during the run), so the terminal has specgrid's only."""
RAY_FORMAT = "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"
"""Ray's own format for its lines (ray/_private/log.py)."""


def hold_ray_logs() -> logging.handlers.MemoryHandler:
    """Ray's logger kept off the terminal while Ray starts: its terminal handler removed and
    its lines held in memory until the session's logs folder is known (`keep_ray_logs`)."""
    logger = logging.getLogger("ray")
    for handler in list(logger.handlers):  # Ray's terminal one, or an earlier session's file
        logger.removeHandler(handler)
        handler.close()
    # flushLevel above CRITICAL: nothing is written before a target is set
    held = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL + 1)
    logger.addHandler(held)
    logger.propagate = False  # never the root logger's (or Python's last-resort) stderr
    return held


def keep_ray_logs(held: logging.handlers.MemoryHandler, session_dir: str | None) -> Path | None:
    """The held lines, and every later one of Ray's logger, into RAY_LOG of the session's logs
    folder; the path, or None when the session has no folder here (the lines are dropped)."""
    logger = logging.getLogger("ray")
    logger.removeHandler(held)
    if not session_dir or not (Path(session_dir) / "logs").is_dir():
        held.close()
        logger.addHandler(logging.NullHandler())
        return None
    path = Path(session_dir) / "logs" / RAY_LOG
    file = logging.FileHandler(path, encoding="utf-8")
    file.setFormatter(logging.Formatter(RAY_FORMAT))
    held.setTarget(file)
    held.close()  # flushes the held lines to the file
    logger.addHandler(file)
    return path


def connect(cfg: DictConfig, plan: Plan) -> list[int]:
    """Start or join Ray (once per process), then check every server fits on one node; returns
    the GPUs of each node. ConfigError (one line) if a server cannot be placed."""
    if not ray.is_initialized():
        # Ray's per-actor log lines are noise here; server logs come back through their actor.
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        held = hold_ray_logs()  # Ray's own lines go to its session's logs, not the terminal
        if cfg.cluster.kind == "ray":
            env = runtime_env()
            if env:  # ship the compiled module with the checkout (WORKING_DIR_EXCLUDES)
                os.environ["RAY_RUNTIME_ENV_IGNORE_GITIGNORE"] = "1"
            try:
                context = ray.init(address=cfg.cluster.address, include_dashboard=False,
                                   log_to_driver=False, runtime_env=env)
            except ConnectionError as e:
                keep_ray_logs(held, None)
                raise ConfigError(f"cannot join the Ray cluster at {cfg.cluster.address}: "
                                  f"{str(e).strip().splitlines()[0]}") from None
        else:
            # address="local": a private instance, never a cluster that happens to run here
            # (ray.init() alone joins one found through RAY_ADDRESS or /tmp/ray).
            context = ray.init(address="local", num_gpus=plan.cluster_gpus,
                               num_cpus=cfg.cluster.num_cpus, include_dashboard=False,
                               log_to_driver=False)
        keep_ray_logs(held, (getattr(context, "address_info", None) or {}).get("session_dir"))
    gpus = node_gpus()
    needs_gpus = any(server_gpus(g) > 0 for g in plan.groups)
    if needs_gpus and sum(gpus) == 0:
        raise ConfigError("the Ray cluster has no GPUs")
    check_gpus(plan.groups, sum(gpus))
    if needs_gpus:
        check_nodes(plan.groups, gpus)
    check_node_resources(plan.groups, node_resources(), SERVER_CPU)
    return gpus

