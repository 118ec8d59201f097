"""The plan of a run, decided before anything expensive starts: the cells (one validated config
each, composed by Hydra, identified with the engine version detected here), the server groups
with their launch commands, every cell's load specs, the GPUs each needs, checks that fail with
one clear line, and a rough duration estimate. Planning writes nothing to disk."""

from __future__ import annotations

import datetime as dt
import functools
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from actors.loadgen.spec import LoadSpec, Prompt
from engines.launch import LaunchSpec
from engines.sglang.command import concurrency_warnings, threshold_warnings
from engines.sglang.validate import ValidationUnavailable, check_batch, sglang_available
from grid.cells import (
    Cell,
    ServerGroup,
    axis_key,
    axis_overrides,
    dedupe,
    engine_identity,
    expand_axes,
    group_by_server,
    make_cell,
    stable_hash,
)
from grid.config import ConfigError, check_choices
from grid.specs import engine_version, external_url, launch_spec, load_specs, sglang_equivalent
from grid.workloads import load_prompts

SERVER_CPU = 0.01
"""The CPU a ServerActor reserves (placement needs a resource in every bundle)."""
LOGICAL_GPUS = 8
"""GPUs a local Ray cluster advertises when the engine needs none (the simulator): one node."""


@dataclass
class Plan:
    run_id: str
    run_dir: Path
    cells: list[Cell]
    groups: list[ServerGroup]
    launches: dict[str, LaunchSpec | None]
    """Server key -> what is launched (None for an external engine)."""
    prompts: dict[str, tuple[Prompt, ...]]
    cluster_gpus: int | None
    warnings: list[str]
    validation: str
    """What checked the server flags (or that nothing could)."""
    loads: dict[str, tuple[LoadSpec, ...]]
    """Cell id -> one validated LoadSpec per client (URL filled in when the server runs)."""
    max_server_starts: int = 2
    """Consecutive failed starts of a server after which its group's remaining cells fail."""
    max_parallel_servers: int = 1
    """Server groups that run at the same time."""


def compose_cells(base: DictConfig, task_overrides: Sequence[str],
                  compose: Callable[[list[str]], DictConfig]) -> tuple[list[Cell], dict]:
    """One resolved config per axis combination, composed with the command line's overrides
    (minus those the axes set) plus the combination's own."""
    grid = base.grid
    axes = _plain(grid.axes) or {}
    combos = expand_axes(axes, _plain(grid.include), _plain(grid.exclude)) if axes else [{}]
    axis_keys = {axis_key(a) for c in combos for a in c}
    kept = [o for o in task_overrides if _override_key(o) not in axis_keys]
    cells, prompts, digests = [], {}, {}
    for combo in combos:
        cfg = compose([*kept, *axis_overrides(combo)])
        check_choices(cfg)
        config = _plain(cfg)
        _check_load(config["load"], combo)
        workload = config["workload"]
        key = (workload["name"], workload["prompts"], tuple(workload["domains"]))
        if key not in digests:
            prompts[workload["name"]], digests[key] = load_prompts(workload)
        cells.append(make_cell(combo, config, digests[key]))
    return dedupe(cells), prompts


def _plain(node: Any) -> Any:
    """A config node as plain containers, resolved (typed Any: its shape is the schema's)."""
    return OmegaConf.to_container(node, resolve=True)


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _check_load(load: dict[str, Any], combo: dict[str, Any]) -> None:
    where = f" (cell {combo})" if combo else ""
    if load["concurrency"] is None and load["rate"] is None:
        raise ConfigError(f"load needs a concurrency or a rate{where}")
    if load["concurrency"] is not None and load["concurrency"] <= 0:
        raise ConfigError(f"concurrency must be positive, got {load['concurrency']}{where}")
    if load["rate"] is not None and load["rate"] <= 0:
        raise ConfigError(f"rate must be positive, got {load['rate']}{where}")
    if load["clients"] < 1:
        raise ConfigError(f"load.clients must be at least 1, got {load['clients']}")


def default_run_id(cfg: DictConfig) -> str:
    """Derived from the sweep, engine and model, so the same command finds the same run folder
    and resumes; adding cells to a sweep extends that run."""
    engine = engine_identity(_plain(cfg.engine))
    digest = stable_hash({"engine": engine, "model": OmegaConf.to_container(cfg.model)}, 6)
    return f"{cfg.sweep}-{cfg.engine.name}-{cfg.model.name}-{digest}"


def resolve_run_id(cfg: DictConfig) -> str:
    if cfg.run.id:
        return str(cfg.run.id)
    run_id = default_run_id(cfg)
    if cfg.run.fresh:
        run_id += dt.datetime.now().strftime("-%Y%m%d-%H%M%S")
    return run_id


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
    if cfg.cluster.address:
        return None
    if cfg.cluster.num_gpus is not None:
        return int(cfg.cluster.num_gpus)
    found = detected_gpus()
    return found if found or cfg.engine.name != "sim" else LOGICAL_GPUS


def build_plan(cfg: DictConfig, cells: list[Cell], prompts: dict,
               results_dir: Path) -> Plan:
    """Everything decided before anything starts; writes nothing. ConfigError (one line) for
    anything that cannot run."""
    if not cells:
        raise ConfigError("the grid has no cells (every combination was excluded)")
    if cfg.run.max_server_starts < 1:
        raise ConfigError(f"run.max_server_starts must be >= 1, got {cfg.run.max_server_starts}")
    if cfg.grid.max_parallel_servers < 1:
        raise ConfigError("grid.max_parallel_servers must be >= 1, got "
                          f"{cfg.grid.max_parallel_servers}")
    if not cfg.load.client_cpus > 0:
        raise ConfigError(f"load.client_cpus must be > 0, got {cfg.load.client_cpus}")
    run_id = resolve_run_id(cfg)
    run_dir = results_dir / run_id
    version, validator = _sglang_version(cfg)
    # The detected engine version is part of every cell's identity (and server key).
    cells = dedupe(c.with_engine_version(engine_version(c.config, version)) for c in cells)
    groups = group_by_server(cells)
    gpus = cluster_gpus(cfg)
    if cfg.plan and gpus == 0:
        gpus = None  # planning for a GPU node from a machine without GPUs
    loads = {c.cell_id: load_specs(c, prompts[c.workload]) for c in cells}
    check_gpus(groups, gpus)
    check_cpus(groups, cluster_cpus(cfg))
    check_engine(cfg, groups)
    launches = {g.server_key: launch_spec(g.config, version) for g in groups}
    validation = validate_flags(groups, version, validator)
    return Plan(run_id, run_dir, cells, groups, launches, prompts, gpus, plan_warnings(groups),
                validation, loads, int(cfg.run.max_server_starts),
                int(cfg.grid.max_parallel_servers))


def _sglang_version(cfg: DictConfig) -> tuple[str | None, str | None]:
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


def cluster_cpus(cfg: DictConfig) -> float | None:
    """CPUs of the local cluster the run will start (Ray's default: this machine's); None when
    joining an existing cluster."""
    if cfg.cluster.address:
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
        if (group.config["engine"]["name"] == "sglang"
                and "CUDA_DEVICE_MAX_CONNECTIONS" in variant["env"]):
            warnings.append(f"{group.variant}: SGLang overwrites CUDA_DEVICE_MAX_CONNECTIONS=8 "
                            "at start-up; this setting has no effect on the server")
    return list(dict.fromkeys(warnings))


def estimate_seconds(plan: Plan) -> float:
    """Rough: each cell streams its requests at ~12 ms per token per stream (the simulator's
    single-stream pace), plus a server start per group (seconds for the simulator, ten
    minutes for a real model load). With max_parallel_servers > 1, groups are laid out in
    order on that many slots, each taking the next free one (as the controller does)."""
    slots = [0.0] * max(1, plan.max_parallel_servers)
    for group in plan.groups:
        engine = group.config["engine"]["name"]
        seconds = {"sim": 3.0, "external": 1.0}.get(engine, 600.0)
        for cell in group.cells:
            tokens = cell.config["workload"]["max_new_tokens"]
            waves = (cell.num_requests + cell.config["load"]["warmup_requests"]) / max(
                1, cell.concurrency or 1)
            seconds += waves * tokens * 0.012 + 1.0
        slots[slots.index(min(slots))] += seconds
    return max(slots)


def format_plan(plan: Plan, ordered_cells: Sequence[Cell] | None = None) -> str:
    lines = [f"run {plan.run_id} -> {plan.run_dir}",
             f"{len(plan.cells)} cells in {len(plan.groups)} server groups; cluster GPUs: "
             f"{plan.cluster_gpus if plan.cluster_gpus is not None else 'not checked here'}"]
    gpu = 0
    for n, group in enumerate(plan.groups, 1):
        spec = plan.launches[group.server_key]
        engine = group.config["engine"]["name"]
        lines.append("")
        if spec is None:
            lines.append(f"server {n}: {group.variant} at {group.config['engine']['url']} "
                         "(external: not launched, no GPUs reserved)")
        else:
            # One at a time, each server gets GPUs 0..tp-1 of its node; in parallel, Ray
            # assigns each its own.
            gpus = ",".join(str(gpu + i) for i in range(group.tp_size))
            where = (f"CUDA_VISIBLE_DEVICES={gpus} as assigned by Ray"
                     if plan.max_parallel_servers == 1 else "its own GPUs, assigned by Ray")
            lines.append(f"server {n}: {group.variant} [{engine}] on {group.tp_size} GPU(s) "
                         f"({where})")
            lines.append(f"  command: {shlex.join(spec.argv)} {spec.port_flag} <free port>"
                         + "".join(f" {f} <free port>" for f in spec.extra_port_flags))
            for name, content in sorted(spec.files.items()):
                lines.append(f"  file {name} (written beside the server): {content.strip()}")
            if spec.env:
                lines.append("  env: " + " ".join(f"{k}={v}" for k, v in sorted(spec.env.items())))
        if group.cells[0].engine_version:
            lines.append(f"  engine: {group.cells[0].engine_version}")
        for cell in group.cells:
            lines.append(f"  cell {cell.cell_id}: {cell.describe()} "
                         f"requests={cell.num_requests}")
    lines.append("")
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append(plan.validation)
    minutes = estimate_seconds(plan) / 60
    how = ("servers run one after another" if plan.max_parallel_servers == 1 else
           f"up to {plan.max_parallel_servers} servers at a time")
    lines.append(f"estimate: ~{minutes:.1f} min (rough; {how})")
    return "\n".join(lines)

