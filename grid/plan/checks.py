"""The plan's checks against what the run will meet: GPUs and CPUs of the cluster, the engine's
own flag parser, the engine program, warnings a user should read before the run. Each failure is
one ConfigError line, raised before anything expensive starts."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

import engines
from engines.validation import ValidationUnavailable
from grid.plan.cells import ServerGroup
from grid.plan.config import ConfigError
from grid.plan.placement import group_cpus, server_gpus
from grid.plan.specs import engine_python, external_url, launch_spec, sglang_equivalent

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


@dataclass(frozen=True)
class EngineCheck:
    """What the plan found out about one engine configuration before anything starts."""

    version: str | None
    """The version its flags are spelled for (engine.version, else the one detected)."""
    validator: str | None
    """The Python whose copy of the engine's parser checks its commands (None = unchecked)."""
    parser: str
    """Which engine's parser: the engine's own, SGLang's for the simulator (it takes SGLang's
    flags)."""


def engine_check(engine: Mapping[str, Any]) -> EngineCheck:
    """Version and parser of one engine config (a cell's `engine`): a real engine reads its
    version where the server will run (engine.python) unless engine.version says, and is
    checked by that Python's parser (or engine.validate_python's); the simulator only when
    engine.validate_python names a Python with SGLang. ConfigError when engine.validate_python
    cannot import the engine."""
    kind = engines.get(engine["name"])
    if not kind.launches:
        return EngineCheck(None, None, kind.name)
    parser = "sglang" if kind.simulated else kind.name
    given = engine.get("validate_python")
    validator = given or (None if kind.simulated else engine_python(engine))
    found = _detected(parser, validator) if validator else None
    if given and found is None:
        raise ConfigError(f"engine.validate_python={given} cannot import "
                          f"{engines.get(parser).label}")
    version = engine.get("version") or (None if kind.simulated else found)
    return EngineCheck(version, validator if found else None, parser)


@functools.lru_cache(maxsize=16)
def _detected(engine: str, python: str) -> str | None:
    """The engine's version importable with `python` (a 4-20 s import, so asked once)."""
    return engines.get(engine).detect_version(python)


def validate_flags(groups: Sequence[ServerGroup], checks: Mapping[str, EngineCheck]) -> str:
    """Check every server command with its engine's own parser (one subprocess per engine);
    a rejected flag is a ConfigError naming the variant and the flag. `checks` by server key."""
    batches: dict[tuple[str, str], dict[str, list[str]]] = {}
    unchecked: list[str] = []
    for group in groups:
        check = checks[group.server_key]
        if not engines.get(group.config["engine"]["name"]).launches:
            continue
        if check.validator is None:
            unchecked.append(group.variant)
            continue
        spec = (sglang_equivalent(group.config, check.version) if check.parser == "sglang"
                and group.config["engine"]["name"] != "sglang"
                else launch_spec(group.config, check.version))
        assert spec is not None
        batches.setdefault((check.parser, check.validator), {})[group.variant] = spec.argv
    done = []
    for (parser, python), argvs in batches.items():
        kind = engines.get(parser)
        try:
            found, _, problems = kind.validate(argvs, python)
        except ValidationUnavailable as e:
            raise ConfigError(str(e).splitlines()[0]) from None
        if problems:
            p = problems[0]
            first = p.message.strip().splitlines()[-1] if p.message.strip() else p.message
            raise ConfigError(f"variant {p.label}: {kind.label} rejects {p.flag or 'its flags'}"
                              f": {first}")
        done.append(f"{kind.label} {found}'s own parser ({len(argvs)} commands)")
    if not done and not unchecked:
        return "external server: no command to validate"
    line = f"server flags validated by {'; '.join(done)}" if done else ""
    if unchecked:
        line += ("; " if line else "") + (
            f"note: the flags of {', '.join(unchecked)} were NOT validated (the engine is not "
            "importable; set engine.validate_python to a Python that has it)")
    return line


def check_gpus(groups: Sequence[ServerGroup], gpus: int | None) -> None:
    if gpus is None:
        return
    for group in groups:
        need = server_gpus(group)
        if need > gpus:
            raise ConfigError(
                f"variant {group.variant} needs {need} GPUs but the cluster has {gpus}")


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
        need = group_cpus(group, SERVER_CPU)
        if need > cpus:
            raise ConfigError(
                f"variant {group.variant}: load.clients={load['clients']} x load.client_cpus="
                f"{load['client_cpus']:g} (+ the server's {SERVER_CPU:g}) need {need:g} CPUs on "
                f"one node but the local cluster has {cpus:g} (lower load.client_cpus or raise "
                "cluster.num_cpus)")


def check_engine(cfg: DictConfig, groups: Sequence[ServerGroup]) -> None:
    """The engine against what the grid asks of it: an external engine needs a usable URL and
    serves one configuration; a launched one takes no URL; on a local cluster (the plan runs on
    the node that starts the servers) a real engine's Python must exist."""
    for group in groups:
        engine = group.config["engine"]
        external_url(engine)
        kind = engines.get(engine["name"])
        if kind.launches and not kind.simulated and cfg.cluster.kind == "local":
            python = engine_python(engine)
            if shutil.which(python) is None:
                raise ConfigError(
                    f"engine.python={engine.get('python') or python} ({kind.label}) is not an "
                    "executable here" + ("; build the CPU engines with `bash "
                                          "scripts/engine_envs.sh --one`"
                                          if engine.get("device") == "cpu" else ""))
    if any(not engines.get(g.config["engine"]["name"]).launches for g in groups):
        if len(groups) > 1:
            raise ConfigError(
                f"this sweep needs {len(groups)} distinct server configurations "
                f"({', '.join(g.variant for g in groups)}); one external URL serves only one")


def plan_warnings(groups: Sequence[ServerGroup]) -> list[str]:
    """What the engines say a user should read about each server group."""
    warnings = []
    for group in groups:
        concurrencies = [c.concurrency for c in group.cells if c.concurrency]
        kind = engines.get(group.config["engine"]["name"])
        warnings += kind.plan_warnings(group.config["variant"], concurrencies)
    return list(dict.fromkeys(warnings))

