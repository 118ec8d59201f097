"""The plan's checks against what the run will meet: GPUs and CPUs of the cluster, the engine's
own flag parser, the engine program, warnings a user should read before the run. Each failure is
one ConfigError line, raised before anything expensive starts."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from omegaconf import DictConfig

from engines.sglang import adaptive
from engines.sglang.command import concurrency_warnings, threshold_warnings
from engines.sglang.validate import ValidationUnavailable, check_batch, sglang_available
from grid.plan.cells import ServerGroup
from grid.plan.config import ConfigError
from grid.plan.specs import external_url, sglang_equivalent

LOGICAL_GPUS = 8
"""GPUs a local Ray cluster advertises when the engine needs none (the simulator): one node."""
SERVER_CPU = 0.01
"""The CPU a ServerActor reserves (placement needs a resource in every bundle)."""


def detected_gpus() -> int:
    """GPUs nvidia-smi lists on this machine (0 without a driver)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def cluster_gpus(cfg: DictConfig) -> int | None:
    """GPUs of the local cluster the run will start; None when joining an existing cluster
    (checked after joining)."""
    if cfg.cluster.kind == "ray":
        return None
    if cfg.cluster.num_gpus is not None:
        return int(cfg.cluster.num_gpus)
    found = detected_gpus()
    return found if found or cfg.engine.name != "sim" else LOGICAL_GPUS


def sglang_version(cfg: DictConfig) -> tuple[str | None, str | None]:
    """(SGLang version the flags are spelled for, Python whose SGLang parser validates them).
    engine=sglang reads the version where the server will run unless engine.version says."""
    engine = cfg.engine
    validator = engine.validate_python
    if validator is None and engine.name == "sglang":
        validator = engine.python or sys.executable
    found = _importable_sglang(validator) if validator else None
    if validator and engine.validate_python and found is None:
        raise ConfigError(f"engine.validate_python={validator} cannot import SGLang")
    version = engine.version or (found if engine.name == "sglang" else None)
    return version, (validator if found else None)


@functools.lru_cache(maxsize=8)
def _importable_sglang(python: str) -> str | None:
    """SGLang's version importable with `python` (a ~4 s import, so asked once)."""
    return sglang_available(python)


def validate_flags(groups: Sequence[ServerGroup], version: str | None,
                   validator: str | None) -> str:
    """Check every server command with SGLang's own parser (one subprocess for all); a
    rejected flag is a ConfigError naming the variant and the flag."""
    engine = groups[0].config["engine"]["name"]
    if engine == "external":
        return "external server: no command to validate"
    if validator is None:
        return ("note: server flags were NOT validated (SGLang is not importable; set "
                "engine.validate_python to a Python with SGLang)")
    argvs = {g.variant: sglang_equivalent(g.config, version).argv for g in groups}
    try:
        found, _, problems = check_batch(argvs, validator)
    except ValidationUnavailable as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    if problems:
        p = problems[0]
        first = p.message.strip().splitlines()[-1] if p.message.strip() else p.message
        raise ConfigError(f"variant {p.label}: SGLang rejects {p.flag or 'its flags'}: {first}")
    return f"server flags validated by SGLang {found}'s own parser ({len(argvs)} commands)"


def check_gpus(groups: Sequence[ServerGroup], gpus: int | None) -> None:
    if gpus is None:
        return
    for group in groups:
        if group.config["engine"]["name"] != "external" and group.tp_size > gpus:
            raise ConfigError(
                f"variant {group.variant} needs {group.tp_size} GPUs but the cluster has {gpus}")


def check_cluster(cfg: DictConfig) -> None:
    """cluster=local never joins a running cluster; cluster=ray needs an address to join."""
    if cfg.cluster.kind == "local" and cfg.cluster.address:
        raise ConfigError(f"cluster.address={cfg.cluster.address} joins a running Ray cluster: "
                          "use cluster=ray cluster.address=... (cluster=local starts its own)")
    if cfg.cluster.kind == "ray" and not cfg.cluster.address:
        raise ConfigError("cluster=ray needs cluster.address (auto, or the head's host:port)")


def cluster_cpus(cfg: DictConfig) -> float | None:
    """CPUs of the local cluster the run will start (Ray's default: this machine's); None when
    joining an existing cluster."""
    if cfg.cluster.kind == "ray":
        return None
    return float(cfg.cluster.num_cpus or os.cpu_count() or 1)


def check_cpus(groups: Sequence[ServerGroup], cpus: float | None) -> None:
    """Each group's load generators (and its server's sliver) must fit on one node."""
    if cpus is None:
        return
    for group in groups:
        load = group.config["load"]
        need = int(load["clients"]) * float(load["client_cpus"])
        if group.config["engine"]["name"] != "external":
            need += SERVER_CPU
        if need > cpus:
            raise ConfigError(
                f"variant {group.variant}: load.clients={load['clients']} x load.client_cpus="
                f"{load['client_cpus']:g} (+ the server's {SERVER_CPU:g}) need {need:g} CPUs on "
                f"one node but the local cluster has {cpus:g} (lower load.client_cpus or raise "
                "cluster.num_cpus)")


def check_engine(cfg: DictConfig, groups: Sequence[ServerGroup]) -> None:
    """The engine against what the grid asks of it: an external engine needs a usable URL and
    serves one configuration; a launched one takes no URL."""
    for group in groups:
        external_url(group.config["engine"])
    if cfg.engine.name == "external":
        if len(groups) > 1:
            raise ConfigError(
                f"this sweep needs {len(groups)} distinct server configurations "
                f"({', '.join(g.variant for g in groups)}); one external URL serves only one")


def plan_warnings(groups: Sequence[ServerGroup]) -> list[str]:
    warnings = []
    for group in groups:
        variant = group.config["variant"]
        cap = variant["args"].get("max_running_requests")
        if isinstance(cap, int):
            concurrencies = [c.concurrency for c in group.cells if c.concurrency]
            warnings += [f"{group.variant}: {w}" for w in concurrency_warnings(cap, concurrencies)]
            if variant.get("speculative_disable_above_batch") is not None:
                warnings += [f"{group.variant}: {w}" for w in threshold_warnings(
                    variant["speculative_disable_above_batch"], cap)]
        warnings += adaptive.threshold_notes(group.variant, variant)
        if (group.config["engine"]["name"] == "sglang"
                and "CUDA_DEVICE_MAX_CONNECTIONS" in variant["env"]):
            warnings.append(f"{group.variant}: SGLang overwrites CUDA_DEVICE_MAX_CONNECTIONS=8 "
                            "at start-up; this setting has no effect on the server")
    return list(dict.fromkeys(warnings))
