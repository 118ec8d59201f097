"""The plan of a run, decided before anything expensive starts: the cells (one validated config
each, composed by Hydra), the server groups with their launch commands, the GPUs each needs,
checks that fail with one clear line, and a rough duration estimate."""

from __future__ import annotations

import datetime as dt
import functools
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from actors.loadgen.spec import Prompt
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
from grid.servers import launch_spec, sglang_equivalent
from grid.workloads import load_prompts

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
    created_run_dir: bool
    """Planning created the run folder (for adaptive configs); a dry run removes it again."""


def compose_cells(base: DictConfig, task_overrides: Sequence[str],
                  compose: Callable[[list[str]], DictConfig]) -> tuple[list[Cell], dict]:
    """One resolved config per axis combination, composed with the command line's overrides
    (minus those the axes set) plus the combination's own."""
    grid = base.grid
    axes = OmegaConf.to_container(grid.axes, resolve=True) or {}
    combos = expand_axes(axes, OmegaConf.to_container(grid.include, resolve=True),
                         OmegaConf.to_container(grid.exclude, resolve=True)) if axes else [{}]
    axis_keys = {axis_key(a) for c in combos for a in c}
    kept = [o for o in task_overrides if _override_key(o) not in axis_keys]
    cells, prompts, digests = [], {}, {}
    for combo in combos:
        cfg = compose([*kept, *axis_overrides(combo)])
        check_choices(cfg)
        config = OmegaConf.to_container(cfg, resolve=True)
        _check_load(config["load"], combo)
        workload = config["workload"]
        key = (workload["name"], workload["prompts"], tuple(workload["domains"]))
        if key not in digests:
            prompts[workload["name"]], digests[key] = load_prompts(workload)
        cells.append(make_cell(combo, config, digests[key]))
    return dedupe(cells), prompts


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
    if load["ca_bundle"] is not None and not Path(load["ca_bundle"]).is_file():
        raise ConfigError(f"load.ca_bundle={load['ca_bundle']} is not a file")
    if not load["keepalive_s"] > 0:
        raise ConfigError(f"load.keepalive_s must be positive, got {load['keepalive_s']}")


def default_run_id(cfg: DictConfig) -> str:
    """Derived from the sweep, engine and model, so the same command finds the same run folder
    and resumes; adding cells to a sweep extends that run."""
    engine = engine_identity(OmegaConf.to_container(cfg.engine, resolve=True))
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
    """Everything decided before anything starts. A threshold's adaptive config is written
    into the run folder here; if planning fails, a run folder it created is removed again."""
    if not cells:
        raise ConfigError("the grid has no cells (every combination was excluded)")
    run_id = resolve_run_id(cfg)
    run_dir = results_dir / run_id
    groups = group_by_server(cells)
    gpus = cluster_gpus(cfg)
    if cfg.plan and gpus == 0:
        gpus = None  # planning for a GPU node from a machine without GPUs
    check_gpus(groups, gpus)
    check_engine(cfg, groups)
    created = not run_dir.exists()
    try:
        version, validator = _sglang_version(cfg)
        launches = {g.server_key: launch_spec(g.config, run_dir, version) for g in groups}
        validation = validate_flags(groups, run_dir, version, validator)
    except Exception:
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return Plan(run_id, run_dir, cells, groups, launches, prompts, gpus, plan_warnings(groups),
                validation, created and run_dir.exists())


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


def validate_flags(groups: Sequence[ServerGroup], run_dir: Path, version: str | None,
                   validator: str | None) -> str:
    """Check every server command with SGLang's own parser (one subprocess for all); a
    rejected flag is a ConfigError naming the variant and the flag."""
    engine = groups[0].config["engine"]["name"]
    if engine == "external":
        return "external server: no command to validate"
    if validator is None:
        return ("note: server flags were NOT validated (SGLang is not importable; set "
                "engine.validate_python to a Python with SGLang)")
    argvs = {g.variant: sglang_equivalent(g.config, run_dir, version).argv for g in groups}
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


def check_engine(cfg: DictConfig, groups: Sequence[ServerGroup]) -> None:
    if cfg.engine.name == "external":
        if not cfg.engine.url:
            raise ConfigError("engine=external needs engine.url=http://host:port")
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
    minutes for a real model load)."""
    total = 0.0
    for group in plan.groups:
        engine = group.config["engine"]["name"]
        total += {"sim": 3.0, "external": 1.0}.get(engine, 600.0)
        for cell in group.cells:
            tokens = cell.config["workload"]["max_new_tokens"]
            waves = (cell.num_requests + cell.config["load"]["warmup_requests"]) / max(
                1, cell.concurrency or 1)
            total += waves * tokens * 0.012 + 1.0
    return total


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
            # Groups run one after another, each on GPUs 0..tp-1 of its node.
            gpus = ",".join(str(gpu + i) for i in range(group.tp_size))
            lines.append(f"server {n}: {group.variant} [{engine}] on {group.tp_size} GPU(s) "
                         f"(CUDA_VISIBLE_DEVICES={gpus} as assigned by Ray)")
            lines.append(f"  command: {shlex.join(spec.argv)} {spec.port_flag} <free port>"
                         + "".join(f" {f} <free port>" for f in spec.extra_port_flags))
            if spec.env:
                lines.append("  env: " + " ".join(f"{k}={v}" for k, v in sorted(spec.env.items())))
        for cell in group.cells:
            load = f"concurrency={cell.concurrency}" if cell.rate is None else \
                f"rate={cell.rate}/s concurrency<={cell.concurrency}"
            lines.append(f"  cell {cell.cell_id}: {cell.workload} {load} "
                         f"requests={cell.num_requests}")
    lines.append("")
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append(plan.validation)
    minutes = estimate_seconds(plan) / 60
    lines.append(f"estimate: ~{minutes:.1f} min (rough; servers run one after another)")
    return "\n".join(lines)

