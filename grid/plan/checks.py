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
from actors.loadgen.spec import Prompt
from engines.validation import ValidationUnavailable
from grid.plan.cells import Cell, ServerGroup
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
        if group.config["workload"]["endpoint"] == "generate" and kind.launches \
                and not kind.endpoints.native_generate:
            raise ConfigError(f"variant {group.variant}: {kind.label} serves no native "
                              "/generate (SGLang's): use workload.endpoint=chat")
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



EXTRAPOLATION = "extrapolation"
"""How a simulated cell outside its profile's calibrated envelope is marked (plan, report)."""


def sim_envelope(cell: Cell, prompts: Sequence[Prompt] | None = None) -> str | None:
    """Where a simulated cell stands against the calibrated envelope of its hardware x model
    pair (engines/sim/profile.py ``Envelope``): None for a cell that is not simulated, "" inside,
    else the reasons it is outside ("; "-joined), which make its numbers extrapolation.

    Checked from the cell's config: its concurrency (an open-loop cell: the batch its rate
    implies by Little's law, rate x max_new_tokens x the modelled batch-1 decode step x
    time_scale, capped by max_running_requests and max_in_flight), its workload's
    max_new_tokens, its prompts' shortest and longest length (characters / 4, the planner's and
    calibrate.py's rule; loaded from the workload when ``prompts`` is None), and for a
    speculative cell its EAGLE-3 shape and prompt domains. A conversation cell is always
    outside: no anchor replays multi-turn contexts."""
    config = cell.config
    engine = config["engine"]
    if not engines.get(engine["name"]).simulated:
        return None
    from engines.sim.model import PerfModel
    from engines.sim.profile import load_profile
    from grid.plan.conversations import is_conversations
    from grid.plan.workloads import CHARS_PER_TOKEN, load_workload

    sim_args = engine.get("sim_args") or {}
    profile = load_profile(str(sim_args.get("profile") or "default"), sim_args.get("hardware"),
                           sim_args.get("model"))
    env = profile.envelope
    if env is None:
        return (f"no anchor covers {profile.hardware_data.get('name')} / "
                f"{profile.model_data.get('name')} (docs/simulator.md 'Calibrated envelope')")
    workload, variant = config["workload"], config["variant"]
    args = variant.get("args") or {}
    reasons: list[str] = []
    tokens = workload.get("max_new_tokens")
    concurrency: float | None = cell.concurrency
    if cell.rate is not None:
        roofline, _ = profile.roofline(cell.tp_size, dict(variant.get("env") or {}), dict(args))
        scale = sim_args.get("time_scale")
        implied = (cell.rate * int(tokens or 1) * PerfModel(roofline).decode_s(1)
                   * (1.0 if scale is None else float(scale)))
        caps = [c for c in (args.get("max_running_requests"), cell.max_in_flight) if c]
        concurrency = round(max(1.0, min([implied, *map(float, caps)])), 1)
    length: tuple[int, int] | None = None
    domains: list[str] = []
    if is_conversations(workload):
        reasons.append("multi-turn conversation replay (no anchor covers growing contexts)")
    else:
        if prompts is None:
            prompts = load_workload(workload).prompts
        sizes = [-(-len(p.text) // CHARS_PER_TOKEN) for p in prompts]
        length = (min(sizes), max(sizes)) if sizes else None
        domains = sorted({p.domain for p in prompts})
    shape: tuple[int, int, int] | None = None
    algorithm = str(args.get("speculative_algorithm") or "").upper()
    if algorithm:
        parts = [args.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                       "speculative_num_draft_tokens")]
        if algorithm != "EAGLE3" or None in parts:
            auto = " with SGLang's automatic shape" if algorithm == "EAGLE3" else ""
            reasons.append(f"speculative algorithm {algorithm}{auto} (the anchor measured "
                           "EAGLE3 with explicit shapes)")
        else:
            shape = (int(parts[0]), int(parts[1]), int(parts[2]))  # type: ignore[arg-type]
        for key in ("speculative_disable_above_batch", "speculative_depth",
                    "speculative_adaptive"):
            if variant.get(key) not in (None, False):
                reasons.append(f"{key} (no anchor measured the adaptive switch)")
    reasons += env.outside(concurrency=concurrency, output_tokens=tokens, prompt_tokens=length,
                           speculative=shape, domains=domains if algorithm else ())
    return "; ".join(reasons)


def _loads(cells: Sequence[Cell]) -> str:
    """`c=1,2,4` / `2/s` / a workload: the loads of cells, short."""
    loads = [f"{c.concurrency:g}" if c.concurrency else f"{c.rate:g}/s" for c in cells]
    # each load once: the repeats of a level are the same load
    return ("c=" if cells[0].concurrency else "") + ",".join(dict.fromkeys(loads))


def envelope_warnings(cells: Sequence[Cell],
                      prompts: Mapping[str, Sequence[Prompt]]) -> list[str]:
    """One plan warning per server group with simulated cells outside the calibrated envelope
    (sim_envelope): its cells, marked extrapolation, with the reasons and the envelope."""
    from engines.sim.profile import load_profile

    by_group: dict[str, list[tuple[Cell, str]]] = {}
    for cell in cells:
        why = sim_envelope(cell, prompts.get(cell.workload_name))
        if why:
            by_group.setdefault(cell.server_key, []).append((cell, why))
    out = []
    for members in by_group.values():
        first = members[0][0]
        args = first.config["engine"].get("sim_args") or {}
        env = load_profile(str(args.get("profile") or "default"), args.get("hardware"),
                           args.get("model")).envelope
        covered = env.describe() if env else "no calibrated envelope"
        # cells outside for the same reasons are one clause (each cell is marked in its line)
        reasons: dict[str, list[Cell]] = {}
        for cell, why in members:
            reasons.setdefault(why, []).append(cell)
        listed = "; ".join(f"{_loads(group)}: {why}" for why, group in reasons.items())
        out.append(f"{EXTRAPOLATION}: SIMULATION outside the calibrated envelope in "
                   f"{len(members)} cell(s) of server {first.variant} ({listed}) [{covered}]")
    return out
