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
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

import engines
from actors.loadgen.spec import Prompt
from engines.planning import EnvelopeFinding, Scenario
from engines.validation import ValidationUnavailable
from grid.plan.cells import Cell, ServerGroup, resolved_tp_size
from grid.plan.config import ConfigError
from grid.plan.placement import group_cpus, server_gpus
from grid.plan.specs import engine_python, equivalent_launch, external_url, launch_spec

LOGICAL_GPUS = 8
"""GPUs a local Ray cluster advertises on a machine without any for an engine that models
them (a simulated one): one node."""
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
    return found if found or not engines.get(cfg.engine.name).simulated else LOGICAL_GPUS


@dataclass(frozen=True)
class EngineCheck:
    """What the plan found out about one engine configuration before anything starts."""

    version: str | None
    """The version its flags are spelled for (engine.version, else the one detected)."""
    validator: str | None
    """The Python whose copy of the engine's parser checks its commands (None = unchecked)."""
    parser: str
    """Which engine's parser: the engine's own, or that of the engine whose flags it takes
    (`Engine.flags_of`: SGLang's for the simulator)."""


def engine_check(engine: Mapping[str, Any]) -> EngineCheck:
    """Version and parser of one engine config (a cell's `engine`): a real engine reads its
    version where the server will run (engine.python) unless engine.version says, and is
    checked by that Python's parser (or engine.validate_python's); a simulated one only when
    engine.validate_python names a Python with the engine whose flags it takes. ConfigError
    when engine.validate_python cannot import that engine."""
    kind = engines.get(engine["name"])
    if not kind.launches:
        return EngineCheck(None, None, kind.name)
    parser = kind.flags_of or kind.name
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
        spec = (equivalent_launch(group.config, check.parser, check.version)
                if check.parser != group.config["engine"]["name"]
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


def check_memory(groups: Sequence[ServerGroup]) -> None:
    """A server whose model leaves no room for a KV cache on its GPUs exits at start-up, as
    SGLang does; where its engine can tell before starting (the simulator, from its profiles:
    engines/sim/memory.py), the plan refuses it now with the engine's own line."""
    for group in groups:
        engine = group.config["engine"]
        model = engines.modeller(engine["name"])
        problem = model.fit_problem(
            group.config["variant"], engine.get("options") or {},
            resolved_tp_size(group.config)) if model else None
        if problem:
            raise ConfigError(f"variant {group.variant}: {problem} (model.tp_size or "
                              "variant.tp_size)")


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


def cell_scenario(cell: Cell, prompts: Sequence[Prompt] | None = None) -> Scenario:
    """What a cell asks of its server, from its config: its load, its workload's
    max_new_tokens, its prompts' shortest and longest length (characters / 4, the planner's
    rule; loaded from the workload when ``prompts`` is None) and their domains, its variant."""
    from grid.plan.conversations import is_conversations
    from grid.plan.workloads import CHARS_PER_TOKEN, load_workload

    config = cell.config
    workload, variant = config["workload"], config["variant"]
    length: tuple[int, int] | None = None
    domains: list[str] = []
    conversations = is_conversations(workload)
    if not conversations:
        if prompts is None:
            prompts = load_workload(workload).prompts
        sizes = [-(-len(p.text) // CHARS_PER_TOKEN) for p in prompts]
        length = (min(sizes), max(sizes)) if sizes else None
        domains = sorted({p.domain for p in prompts})
    tokens = workload.get("max_new_tokens")
    return Scenario(
        args=dict(variant.get("args") or {}), concurrency=cell.concurrency, rate=cell.rate,
        max_in_flight=cell.max_in_flight, output_tokens=None if tokens is None else int(tokens),
        prompt_tokens=length, domains=domains,
        disable_above_batch=variant.get("speculative_disable_above_batch"),
        depth_schedule=variant.get("speculative_depth") is not None,
        adaptive=bool(variant.get("speculative_adaptive")),
        conversations=conversations, tp_size=cell.tp_size, env=dict(variant.get("env") or {}))


def cell_envelope(cell: Cell, prompts: Sequence[Prompt] | None = None
                  ) -> EnvelopeFinding | None:
    """Where a cell stands against its engine's calibrated envelope (`Modeller.envelope`, the
    one the report asks too): None for an engine whose numbers are measured."""
    engine = cell.config["engine"]
    model = engines.modeller(engine["name"])
    if model is None:  # measured numbers have no envelope: skip reading the prompts
        return None
    return model.envelope(engine.get("options") or {}, cell_scenario(cell, prompts))


def outside_envelope(cell: Cell, prompts: Sequence[Prompt] | None = None) -> str | None:
    """None for a cell whose numbers are measured, "" inside its engine's calibrated
    envelope, else the reasons it is outside ("; "-joined), which make its numbers
    extrapolation."""
    found = cell_envelope(cell, prompts)
    return None if found is None else "; ".join(found.outside)


def _loads(cells: Sequence[Cell]) -> str:
    """`c=1,2,4` / `2/s` / a workload: the loads of cells, short."""
    loads = [f"{c.concurrency:g}" if c.concurrency else f"{c.rate:g}/s" for c in cells]
    # each load once: the repeats of a level are the same load
    return ("c=" if cells[0].concurrency else "") + ",".join(dict.fromkeys(loads))


def envelope_warnings(cells: Sequence[Cell],
                      prompts: Mapping[str, Sequence[Prompt]]) -> list[str]:
    """One plan warning per server group with simulated cells outside the calibrated envelope
    (cell_envelope): its cells, marked extrapolation, with the reasons and the envelope."""
    by_group: dict[str, list[tuple[Cell, str]]] = {}
    covered: dict[str, str] = {}
    for cell in cells:
        found = cell_envelope(cell, prompts.get(cell.workload_name))
        if found is not None and found.outside:
            by_group.setdefault(cell.server_key, []).append((cell, "; ".join(found.outside)))
            covered[cell.server_key] = found.covered
    out = []
    for key, members in by_group.items():
        first = members[0][0]
        # cells outside for the same reasons are one clause (each cell is marked in its line)
        reasons: dict[str, list[Cell]] = {}
        for cell, why in members:
            reasons.setdefault(why, []).append(cell)
        listed = "; ".join(f"{_loads(group)}: {why}" for why, group in reasons.items())
        out.append(f"{EXTRAPOLATION}: SIMULATION outside the calibrated envelope in "
                   f"{len(members)} cell(s) of server {first.variant} ({listed}) "
                   f"[{covered[key]}]")
    return out


TINY_HINT = "build the tiny models with `python scripts/tiny_models.py`"
TRAINED_HINT = "build the trained tiny models with `python scripts/train_models.py`"
GENERIC_HINT = ("give the folder of a model saved with its config.json, or a Hugging Face repo "
                "id (org/name)")


def model_paths(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, path) of every model a cell's server loads: the model, and for a speculative
    variant its draft model (the variant's own `speculative_draft_model_path`, else the
    model's `draft_model_path`)."""
    model, args = config["model"], config["variant"].get("args") or {}
    out = [("model.model_path", str(model["model_path"]))]
    if args.get("speculative_algorithm"):
        own = args.get("speculative_draft_model_path")
        if own:
            out.append(("variant.args.speculative_draft_model_path", str(own)))
        elif model.get("draft_model_path"):
            out.append(("model.draft_model_path", str(model["draft_model_path"])))
    return out


def local_folder(path: str) -> bool:
    """Whether `path` names a folder on this machine (absolute, `~`, `./` or `../`); anything
    else (`org/name`) is a Hugging Face repo id the engine resolves itself."""
    return path.startswith(("/", "~", "./", "../")) or path in (".", "..")


def _hint(folder: Path) -> str:
    from engines.tiny_models import cache_root

    caches = {cache_root().expanduser().resolve(), (Path.home() / ".cache/specgrid").resolve()}
    resolved = folder.resolve()
    if not any(resolved.is_relative_to(c) for c in caches):
        return GENERIC_HINT
    trained = any(p.name.startswith("trained-") for p in resolved.parents) or \
        resolved.name.startswith("trained-")
    return TRAINED_HINT if trained else TINY_HINT


def check_model_paths(cells: Sequence[Cell], cluster_kind: str) -> None:
    """Every local model folder a launched real engine will load holds a config.json (on a
    local cluster: the folders are on this machine), so an absent model is refused here rather
    than by the server's traceback once it starts. Hub ids are the engine's to resolve."""
    if cluster_kind != "local":
        return
    seen: set[tuple[str, str]] = set()
    for cell in cells:
        kind = engines.get(cell.config["engine"]["name"])
        if not kind.launches or kind.simulated:
            continue  # the simulator loads no weights; an external server has its own
        for field, path in model_paths(cell.config):
            if (field, path) in seen or not local_folder(path):
                continue
            seen.add((field, path))
            folder = Path(path).expanduser()
            if not (folder / "config.json").is_file():
                raise ConfigError(f"{field}={path}: no config.json there; {_hint(folder)}")
