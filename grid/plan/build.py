"""The plan of a run, decided before anything expensive starts: the cells (one validated config
each, composed by Hydra, identified with the engine version detected here), the server groups
with their launch commands, every cell's load specs, the GPUs each needs, checks that fail with
one clear line, and a rough duration estimate. Planning writes nothing to disk."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from actors.loadgen.spec import Prompt
from actors.loadgen.transport import settings_error
from engines.launch import LaunchSpec
from engines.redact import redact_argv
from grid.plan.cells import (
    GROUP_AXES,
    Cell,
    ServerGroup,
    axis_key,
    dedupe,
    engine_identity,
    expand_axes,
    group_by_server,
    make_cell,
    one_per_server,
    stable_hash,
    start_order,
    unmeasured_key,
)
from grid.plan.checks import (
    check_cluster,
    check_cpus,
    check_engine,
    check_gpus,
    check_memory,
    check_model_paths,
    cluster_cpus,
    cluster_gpus,
    engine_check,
    envelope_warnings,
    outside_envelope,
    plan_warnings,
    validate_flags,
)
from grid.plan.choices import check_choices
from grid.plan.compose import split_overrides, with_values
from grid.plan.config import ConfigError
from grid.plan.conversations import (
    conversation_set_key,
    is_conversations,
    load_conversation_set,
)
from grid.plan.estimate import RUN_OVERHEAD_S, Measured, Source, estimate_cell
from grid.plan.overrides import CommandLine, merge_axes
from grid.plan.placement import server_gpus
from grid.plan.specs import clock_scale, engine_version, external_url, launch_spec
from grid.plan.stopping import check_stopping, describe_stop
from grid.plan.work import PlannedCell, plan_cell, source_label
from grid.plan.workload_keys import check_workload_keys
from grid.plan.workloads import (
    AlignmentCache,
    WorkloadPlan,
    alignment_lines,
    alignment_warnings,
    check_drafter,
    drafter_options,
    is_speculative,
    load_workload,
    prompt_set_key,
)


@dataclass
class Plan:
    run_id: str
    run_dir: Path
    cells: list[Cell]
    groups: list[ServerGroup]
    launches: dict[str, LaunchSpec | None]
    """Server key -> what is launched (None for an external engine); each start of it gets
    its group's start seed (`LaunchSpec.with_start_seed`)."""
    prompts: dict[str, tuple[Prompt, ...]]
    cluster_gpus: int | None
    warnings: list[str]
    validation: str
    """What checked the server flags (or that nothing could)."""
    works: dict[str, PlannedCell]
    """Cell id -> what running it takes (grid/plan/work.py)."""
    max_server_starts: int = 2
    """Consecutive failed starts of a server after which its group's remaining cells fail."""
    max_parallel_servers: int = 1
    """Server groups that run at the same time."""
    exclusive_node: bool = True
    """One server per node (grid.exclusive_node); False packs servers on GPU subsets."""
    workloads: WorkloadPlan | None = None
    """Prompt sets and each speculative cell's alignment with its drafter (plan/workloads.py)."""
    measured: dict[str, Measured] = dataclasses.field(default_factory=dict)
    """Cell id -> the run folder's done cells when the plan was made: the estimate of a real
    engine's cells (grid/plan/estimate.py). Set by the caller (grid/run.py) that reads the
    folder; the plan itself reads nothing."""

    def work(self, cell: Cell) -> PlannedCell:
        return self.works[cell.cell_id]

    def cell_estimate(self, cell: Cell) -> tuple[float | None, Source]:
        """estimate_cell with the cell's conversation work, if it has any, and the measured
        cells: (seconds, where they come from); None = unknown (a real engine, nothing
        measured on its server)."""
        return estimate_cell(cell, self.work(cell).conversation, self.measured)

    def cell_seconds(self, cell: Cell) -> float | None:
        return self.cell_estimate(cell)[0]


def compose_grid(line: CommandLine, compose: Callable[[list[str]], DictConfig]) -> DictConfig:
    """The run's config: the fixed overrides composed, with the command line's sweeps merged
    into grid.axes (a fixed override of an axis is a ConfigError naming both)."""
    cfg = compose(line.fixed)
    config_axes: dict[str, Any] = _plain(cfg.grid.axes) or {}
    source = f"sweep {cfg.sweep}" if cfg.sweep != "single" else "grid.axes"
    cfg.grid.axes = merge_axes(config_axes, line, source)
    check_choices(cfg)
    for axis in cfg.grid.axes:
        _check_axis_key(cfg, axis)
    for extra in _plain(cfg.grid.include) or []:  # extra cells: their keys act as axes too
        for axis, value in extra.items():
            _check_axis_key(cfg, axis)
            text = line.fixed_keys.get(axis_key(axis))
            if text is not None:
                raise ConfigError(f"override {text} collides with {axis}={value!r} of an extra "
                                  f"cell (grid.include) of {source}; drop the override")
    return cfg


def _check_axis_key(cfg: DictConfig, axis: str) -> None:
    """An axis must name a key of the schema: cells set axes with Hydra's `++` (force add, so
    that open dicts such as variant.env take new keys), which would also add a misspelt key to
    a schema section. Below an open dict (env, args, engine.options) any key is allowed (the
    engine checks its options)."""
    if axis in GROUP_AXES:
        return
    if unmeasured_key(axis_key(axis)):
        raise ConfigError(f"grid axis {axis}: {axis_key(axis)} changes how a run is operated, "
                          "not what a cell measures (not part of a cell's id); set it once "
                          "instead of sweeping it")
    node: Any = cfg
    for part in axis_key(axis).split("."):
        schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
        if schema is None or not dataclasses.is_dataclass(schema):
            return
        if part not in node:
            raise ConfigError(f"grid axis {axis}: Key '{part}' not in '{schema.__name__}'")
        node = node[part]


def compose_cells(base: DictConfig, fixed_overrides: Sequence[str],
                  compose: Callable[[list[str]], DictConfig]) -> tuple[list[Cell], WorkloadPlan]:
    """One resolved config per axis combination of `base.grid` (see compose_grid), composed
    with the fixed overrides plus the combination's own; each workload loaded once and each
    speculative cell's workload aligned with its drafter."""
    grid = base.grid
    axes = _plain(grid.axes) or {}
    combos = expand_axes(axes, _plain(grid.include), _plain(grid.exclude)) if axes else [{}]
    cells: list[Cell] = []
    loaded: dict[str, Any] = {}
    workloads, aligner = WorkloadPlan(), AlignmentCache()
    chosen: dict[tuple[str, ...], DictConfig] = {}  # one compose per choice of config groups
    for combo in combos:
        groups, values = split_overrides(combo)
        if groups not in chosen:
            chosen[groups] = compose([*fixed_overrides, *groups])
        cfg = with_values(chosen[groups], values)
        check_choices(cfg)
        config: dict[str, Any] = _plain(cfg)
        _check_load(config["load"], combo)
        check_stopping(config, combo)
        check_drafter(config)
        if is_speculative(config):
            # An engine that models acceptance follows the model's drafter (the simulator).
            config["engine"]["options"] = {**drafter_options(config),
                                           **(config["engine"]["options"] or {})}
        if is_conversations(config["workload"]):  # multi-turn replay (grid/plan/conversations.py)
            key = conversation_set_key(config["workload"])
            if key not in loaded:
                loaded[key] = load_conversation_set(config["workload"])
                if loaded[key].name in workloads.conversations:
                    raise ConfigError(f"workload name {loaded[key].name!r} names two different "
                                      "conversation sets in this grid; give them distinct "
                                      "workload.name")
                workloads.conversations[loaded[key].name] = loaded[key]
                workloads.notes += loaded[key].notes
            cells.append(make_cell(combo, config, loaded[key].digest))
            continue
        key = prompt_set_key(config["workload"])
        if key not in loaded:
            loaded[key] = load_workload(config["workload"])
            if loaded[key].name in workloads.sets:
                raise ConfigError(f"workload name {loaded[key].name!r} names two different "
                                  "prompt sets in this grid; give them distinct workload.name")
            workloads.sets[loaded[key].name] = loaded[key]
            workloads.notes += loaded[key].notes
        cell = make_cell(combo, config, loaded[key].digest)
        alignment = aligner.for_cell(config, loaded[key])
        if alignment is not None:
            workloads.alignments[cell.cell_id] = alignment
        cells.append(cell)
    workloads.notes += aligner.reference_notes()
    check_workload_keys(c.config["workload"] for c in cells)  # none silently ignored
    return dedupe(cells), workloads


def _plain(node: Any) -> Any:
    """A config node as plain, resolved containers (typed Any: its shape is the schema's)."""
    return OmegaConf.to_container(node, resolve=True)


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
    transport_error = settings_error(load["transport"], load["tls_verify"], load["ca_bundle"])
    if transport_error is not None:  # the TLS context / proxies the load generator will build
        raise ConfigError(transport_error)
    if not load["keepalive_s"] > 0:
        raise ConfigError(f"load.keepalive_s must be positive, got {load['keepalive_s']}")


def default_run_id(cfg: DictConfig) -> str:
    """Derived from the sweep, engine and model, so the same command finds the same run folder
    and resumes; adding cells to a sweep extends that run."""
    engine = engine_identity(_plain(cfg.engine))
    digest = stable_hash({"engine": engine, "model": OmegaConf.to_container(cfg.model)}, 6)
    return f"{cfg.sweep}-{cfg.engine.name}-{cfg.model.name}-{digest}"


def resolve_run_id(cfg: DictConfig) -> str:
    """run.id, or the derived one; ConfigError unless it is one folder name (a `/` or `..`
    would put the run folder outside results_dir)."""
    if cfg.run.id is not None:
        return checked_run_id(str(cfg.run.id), "run.id")
    run_id = default_run_id(cfg)
    if cfg.run.fresh:
        run_id += dt.datetime.now().strftime("-%Y%m%d-%H%M%S")
    return checked_run_id(run_id, "the run id derived from sweep, engine.name and model.name",
                          "; set run.id=NAME")


def checked_run_id(run_id: str, what: str, fix: str = "") -> str:
    """`run_id` if it names one folder directly inside results_dir. A leading `.` is refused
    too: it would be a hidden folder, and `.`/`..` are not new folders at all."""
    problem = None
    if not run_id:
        problem = "is empty"
    elif "/" in run_id or "\\" in run_id:
        problem = "holds a path separator"
    elif run_id.startswith("."):
        problem = "starts with '.'"
    elif len(run_id.encode()) > 255:  # NAME_MAX of every common file system
        problem = "is longer than 255 bytes"
    if problem is None:
        return run_id
    raise ConfigError(f"{what} {run_id!r} {problem}: a run id is the name of one folder "
                      f"inside results_dir{fix}")


def build_plan(cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
               results_dir: Path) -> Plan:
    """Everything decided before anything starts; writes nothing. ConfigError (one line) for
    anything that cannot run."""
    if not cells:
        raise ConfigError("the grid has no cells (every combination was excluded)")
    if cfg.run.max_server_starts < 1:
        raise ConfigError(f"run.max_server_starts must be >= 1, got {cfg.run.max_server_starts}")
    cell_timeout = cfg.run.cell_timeout_s  # > 0 (grid/plan/choices.py check_ranges)
    if cfg.grid.max_parallel_servers < 1:
        raise ConfigError("grid.max_parallel_servers must be >= 1, got "
                          f"{cfg.grid.max_parallel_servers}")
    check_cluster(cfg)
    if not cfg.load.client_cpus > 0:
        raise ConfigError(f"load.client_cpus must be > 0, got {cfg.load.client_cpus}")
    run_id = resolve_run_id(cfg)
    run_dir = results_dir / run_id
    check_model_paths(cells, cfg.cluster.kind)
    checks = [engine_check(c.config["engine"]) for c in cells]
    # The detected engine version is part of every cell's identity (and server key); the
    # workloads' per-cell alignment follows the cells to their final ids.
    versioned = [c.with_engine_version(engine_version(c.config, check.version))
                 for c, check in zip(cells, checks, strict=True)]
    by_key = {c.server_key: check for c, check in zip(versioned, checks, strict=True)}
    workloads.alignments = {new.cell_id: workloads.alignments[old.cell_id]
                            for old, new in zip(cells, versioned, strict=True)
                            if old.cell_id in workloads.alignments}
    cells = dedupe(versioned)
    groups = group_by_server(cells)
    servers = one_per_server(groups)  # checked and spelled once for all of their repeats
    gpus = cluster_gpus(cfg)
    if cfg.plan and gpus == 0:
        gpus = None  # planning for a GPU node from a machine without GPUs
    prompts = workloads.prompts
    cap = None if cell_timeout is None else float(cell_timeout)
    sources = {g.server_key: source_label(g.config) for g in servers}
    works = {c.cell_id: plan_cell(c, workloads, cap, sources[c.server_key]) for c in cells}
    check_gpus(servers, gpus)
    check_cpus(servers, cluster_cpus(cfg))
    check_engine(cfg, servers)
    check_memory(servers)
    launches = {g.server_key: launch_spec(g.config, by_key[g.server_key].version)
                for g in servers}
    validation = validate_flags(servers, by_key)
    warnings = (plan_warnings(groups) + workloads.notes + alignment_warnings(cells, workloads)
                + envelope_warnings(cells, prompts))
    return Plan(run_id, run_dir, cells, groups, launches, prompts, gpus, warnings, validation,
                works, int(cfg.run.max_server_starts), int(cfg.grid.max_parallel_servers),
                bool(cfg.grid.exclusive_node), workloads)


@dataclass(frozen=True)
class RunEstimate:
    seconds: float | None
    """Ray's start, and each server group's start and cells, of the cells with an estimate
    (None: no cell has one)."""
    unknown: list[Cell]
    """Cells without an estimate (a real engine, nothing measured on its server)."""
    measured: int
    """Cells estimated from the measured cells of their server."""

    def line(self, how: str) -> str:
        """The plan's `estimate:` line."""
        unknown = ""
        if self.unknown:
            servers = "this server" if len({c.server_key for c in self.unknown}) == 1 \
                else "their servers"
            unknown = (f"{len(self.unknown)} cell(s) unknown (real engine, nothing measured "
                       f"yet for {servers})")
        if self.seconds is None:
            return f"estimate: {unknown}"
        source = (f"{self.measured} cell(s) from the measured cells of their server in this "
                  "or an earlier run folder; " if self.measured else "")
        return (f"estimate: {'at least ' if self.unknown else ''}~{self.seconds / 60:.1f} min "
                f"(rough; {source}{how})" + (f"; {unknown}" if unknown else ""))


def estimate_run(plan: Plan) -> RunEstimate:
    """The run's wall time: Ray start, each server group's start, each cell. With
    max_parallel_servers > 1, groups are laid out in order on that many slots, each taking the
    next free one (as the controller does). A group none of whose cells has an estimate adds
    nothing (not even its start): what is known is a lower bound then."""
    slots = [0.0] * max(1, plan.max_parallel_servers)
    unknown: list[Cell] = []
    measured, any_known = 0, False
    for group in plan.groups:
        estimates = [(cell, *plan.cell_estimate(cell)) for cell in group.cells]
        unknown += [cell for cell, seconds, _ in estimates if seconds is None]
        measured += sum(1 for _, _, source in estimates if source == "measured")
        known = [seconds for _, seconds, _ in estimates if seconds is not None]
        if not known:
            continue
        any_known = True
        engine = group.config["engine"]
        seconds = engines.get(engine["name"]).start_seconds(engine.get("device") or "cuda")
        slots[slots.index(min(slots))] += seconds + sum(known)
    return RunEstimate(RUN_OVERHEAD_S + max(slots) if any_known else None, unknown, measured)


def format_plan(plan: Plan) -> str:
    lines = [f"run {plan.run_id} -> {plan.run_dir}",
             f"{len(plan.cells)} cells in {len(plan.groups)} server groups; cluster GPUs: "
             f"{plan.cluster_gpus if plan.cluster_gpus is not None else 'not checked here'}",
             f"placement: {plan.max_parallel_servers} server group(s) at a time, "
             + ("one server per node (grid.exclusive_node)" if plan.exclusive_node
                else "servers packed on GPU subsets of a node (grid.exclusive_node=false)")]
    if any(group.labelled for group in plan.groups):
        lines.append(start_order(plan.groups))
    gpu = 0
    for n, group in enumerate(plan.groups, 1):
        spec = plan.launches[group.server_key]
        engine = group.config["engine"]["name"]
        lines.append("")
        if spec is None:
            lines.append(f"server {n}: {group.label} at {external_url(group.config['engine'])} "
                         "(external: not launched, no GPUs reserved)")
        else:
            # One at a time, each server gets GPUs 0..tp-1 of its node; in parallel, Ray
            # assigns each its own.
            needs = server_gpus(group)
            gpus = ",".join(str(gpu + i) for i in range(needs))
            where = (f"CUDA_VISIBLE_DEVICES={gpus} as assigned by Ray"
                     if plan.max_parallel_servers == 1 else "its own GPUs, assigned by Ray")
            spec = spec.with_start_seed(group.start_seed)
            lines.append(f"server {n}: {group.label} [{engine}] " + (
                f"on {needs} GPU(s) ({where})" if needs else "on the CPU (no GPUs reserved)"))
            key = ""
            if spec.api_key:
                key = f" {spec.api_key_flag} '***'"
            elif spec.binds_beyond_loopback:
                key = (f" {spec.api_key_flag} '***' (generated for the run: the server binds "
                       "beyond loopback)")
            lines.append(f"  command: {shlex.join(redact_argv(spec.argv))} {spec.port_flag} "
                         "<free port>"
                         + "".join(f" {f} <free port>" for f in spec.extra_port_flags) + key)
            for name, content in sorted(spec.files.items()):
                lines.append(f"  file {name} (written beside the server): {content.strip()}")
            if spec.env:
                lines.append("  env: " + " ".join(f"{k}={v}" for k, v in sorted(spec.env.items())))
        if group.cells[0].engine_version:
            lines.append(f"  engine: {group.cells[0].engine_version}")
        model = engines.modeller(engine)
        options = group.config["engine"].get("options") or {}
        if model is not None and (note := model.provenance(options)):
            lines.append(f"  numbers: SIMULATION ({note}): the simulator on a profile fitted "
                         "to that run's measured cells (docs/twin.md)")
        if (scale := clock_scale(group.config["engine"])) != 1:
            lines.append(f"  clock: modelled at time_scale {scale:g}, {1 / scale:g}x the wall's: "
                         f"figures on it, the client's own delay x{1 / scale:g} with them")
        for cell in group.cells:
            work = plan.work(cell).conversation
            size = (f"conversations={work.conversations} rounds={work.rounds}"
                    if work is not None else describe_stop(cell.config["load"], cell.num_requests))
            outside = outside_envelope(cell, plan.prompts.get(cell.workload_name))
            mark = " [SIMULATION, extrapolation: outside the calibrated envelope]" if outside \
                else ""
            lines.append(f"  cell {cell.cell_id}: {cell.describe()} {size}{mark}")
    lines.append("")
    if plan.workloads is not None:  # alignment of each workload x speculative variant
        lines += alignment_lines(plan.cells, plan.workloads)
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    lines.append(plan.validation)
    how = ("servers run one after another" if plan.max_parallel_servers == 1 else
           f"up to {plan.max_parallel_servers} servers at a time")
    lines.append(estimate_run(plan).line(how))
    return "\n".join(lines)

