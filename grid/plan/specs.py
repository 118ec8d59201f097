"""From a cell's resolved config to what runs: the server's LaunchSpec, the load generators'
LoadSpecs and the engine version that belongs to the cell's identity. Built at plan time, so
building them is the check: a spec that cannot be built is a plan error, before anything
starts. Pure: no Ray, no sockets, nothing written."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import ipaddress
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import engines
from actors.loadgen.conversation_plan import ConversationLoadSpec
from actors.loadgen.spec import LoadSpec, Prompt
from engines.base import ServerRequest, depth_schedule
from engines.external.url import ExternalUrlError, normalize_url
from engines.launch import LaunchSpec
from engines.sglang.versions import FlagError
from grid.plan.cells import Cell, resolved_tp_size
from grid.plan.config import ConfigError

PLANNED_URL = "http://server.planned"
"""The URL in a planned LoadSpec; the controller puts the server's real URL in its place."""

# LoadSpec field -> the config key a user sets, so a rejected spec names what to change.
_SPEC_KEYS = {
    "warmup_requests": "load.warmup_requests", "num_requests": "load.num_requests",
    "duration_s": "load.duration_s", "burstiness": "load.burstiness", "rate": "load.rate",
    "max_new_tokens": "workload.max_new_tokens", "request_timeout_s": "load.request_timeout_s",
    "prompts": "workload.prompts", "endpoint": "workload.endpoint", "arrival": "load.arrival",
    "api_key": "engine.api_key",
}


def launch_spec(config: Mapping[str, Any], version: str | None = None) -> LaunchSpec | None:
    """What to launch for `config` (None for an engine that launches nothing: an external
    server's URL is used as it is). `version` spells the flags for that engine release (None =
    as given). ConfigError with the engine's one line for a variant it cannot run."""
    kind = engines.get(config["engine"]["name"])
    variant = config["variant"]
    if not kind.launches:
        given = [k for k in ("speculative_depth", "speculative_adaptive")
                 if variant.get(k) not in (None, False)]
        if given:
            raise ConfigError(f"variant {variant['name']}: {given[0]} needs a server specgrid "
                              f"launches; {kind.label} is run by someone else")
        return None
    try:
        return kind.launch_spec(server_request(config, version))
    except (FlagError, ConfigError):
        raise  # SGLang's flag errors name the field and version; the plan reports them
    except ValueError as e:
        raise ConfigError(f"variant {variant['name']} on {kind.label}: {e}") from None


def server_request(config: Mapping[str, Any], version: str | None = None) -> ServerRequest:
    """The plain values an engine spells a server from, out of a cell's resolved config.
    ValueError (one line) for a depth schedule that is not one."""
    engine, model, variant = config["engine"], config["model"], config["variant"]
    raw_depth = variant.get("speculative_depth")
    return ServerRequest(
        args=variant["args"], env=variant["env"], model_path=model["model_path"],
        draft_model_path=model.get("draft_model_path"),
        served_model_name=model.get("served_model_name"), tp_size=resolved_tp_size(config),
        disable_above_batch=variant.get("speculative_disable_above_batch"),
        python=engine_python(engine), version=version,
        device=engine.get("device") or "cuda", host=bind_host(engine),
        api_key=engine.get("api_key"), ready_timeout_s=float(engine["ready_timeout_s"]),
        stop_timeout_s=float(engine["stop_timeout_s"]), revision=model.get("revision"),
        draft_revision=model.get("draft_revision"),
        options={"launcher": engine.get("launcher") or "serve",
                 "sim_args": engine.get("sim_args") or {}},
        depth_schedule=None if raw_depth is None else depth_schedule(raw_depth),
        adaptive=bool(variant.get("speculative_adaptive")),
        adaptive_config=variant.get("speculative_adaptive_config"))


def engine_python(engine: Mapping[str, Any]) -> str:
    """The interpreter that runs the engine: engine.python ("" = the driver's own), a relative
    path taken from the working directory the run starts in (as a shell would)."""
    python = str(engine.get("python") or "") or sys.executable
    return str(Path(python).absolute()) if "/" in python and not python.startswith("/") \
        else python


def bind_host(engine: Mapping[str, Any]) -> str:
    """engine.host, checked: an IPv4 address (the same value serves every node, so 127.0.0.1
    or 0.0.0.0 in a cluster); ConfigError otherwise."""
    host = str(engine.get("host") or "")
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        raise ConfigError(f"engine.host must be an IPv4 address (127.0.0.1, 0.0.0.0 or a "
                          f"node's address), got {host!r}") from None
    return host


def sglang_equivalent(config: Mapping[str, Any], version: str | None) -> LaunchSpec:
    """The real-SGLang command a simulator group stands for, so SGLang's parser can check the
    flags that drive the simulator too."""
    as_sglang = dict(config)
    as_sglang["engine"] = {**config["engine"], "name": "sglang", "launcher": "serve"}
    spec = launch_spec(as_sglang, version)
    assert spec is not None
    return spec


def external_url(engine: Mapping[str, Any]) -> str | None:
    """The external server's base URL, normalized; ConfigError when it is missing or unusable,
    or when a URL is given to an engine that launches its own server."""
    url = engine.get("url")
    if engine["name"] != "external":
        if url:
            raise ConfigError(f"engine.url is only for engine=external (engine={engine['name']} "
                              "launches its own server)")
        return None
    if not url:
        raise ConfigError("engine=external needs engine.url=http://host:port")
    try:
        return normalize_url(str(url))
    except ExternalUrlError as e:
        raise ConfigError(f"engine.url: {e}") from None


def load_specs(cell: Cell, prompts: tuple[Prompt, ...], url: str = PLANNED_URL
               ) -> tuple[LoadSpec, ...]:
    """One LoadSpec per client of the cell (LoadSpec validates itself). A rate cell is open
    loop, bounded in flight only by `load.max_in_flight`; `load.concurrency` belongs to
    closed-loop cells. ConfigError naming the config key and the cell when a spec is invalid."""
    config = cell.config
    load, workload, model = config["load"], config["workload"], config["model"]
    clients = int(load["clients"])
    where = f" (cell {cell.describe()})"
    if load.get("num_requests") is not None and int(load["num_requests"]) < 1:
        raise ConfigError(f"load.num_requests must be >= 1, got {load['num_requests']}{where}")
    if clients < 1:
        raise ConfigError(f"load.clients must be at least 1, got {clients}")
    open_loop = load.get("rate") is not None
    try:
        base = LoadSpec(
            url=url,
            prompts=prompts,
            endpoint=workload["endpoint"],
            concurrency=load.get("max_in_flight") if open_loop else load["concurrency"],
            rate=load.get("rate"),
            arrival=load["arrival"],
            burstiness=float(load["burstiness"]),
            num_requests=cell.num_requests,
            duration_s=load["duration_s"],
            warmup_requests=int(load["warmup_requests"]),
            max_new_tokens=int(workload["max_new_tokens"]),
            temperature=float(workload["temperature"]),
            ignore_eos=bool(workload["ignore_eos"]),
            request_timeout_s=float(load["request_timeout_s"]),
            model=model.get("served_model_name") or model["model_path"],
            api_key=config["engine"].get("api_key"),
            seed=int(load["seed"]),
            num_clients=clients,
            transport=load["transport"],
            tls_verify=bool(load["tls_verify"]),
            ca_bundle=load["ca_bundle"],
            keepalive_s=float(load["keepalive_s"]),
        )
        return tuple(replace(base, client_index=i) for i in range(clients))
    except ValueError as e:
        raise ConfigError(_config_words(str(e), open_loop) + where) from None


def _config_words(message: str, open_loop: bool) -> str:
    message = message.removeprefix("invalid LoadSpec: ")
    keys = dict(_SPEC_KEYS, concurrency="load.max_in_flight" if open_loop else "load.concurrency")
    return re.sub(r"\b(" + "|".join(keys) + r")\b", lambda m: keys[m.group(1)], message)


PlannedSpec = TypeVar("PlannedSpec", LoadSpec, ConversationLoadSpec)


def at_url(specs: Iterable[PlannedSpec], url: str, api_key: str | None) -> list[PlannedSpec]:
    """The planned specs (a prompt or a conversation cell's) aimed at a running server, with
    the API key it expects."""
    return [replace(spec, url=url, api_key=api_key) for spec in specs]


# --- engine versions (part of a cell's identity) -------------------------------------------
def engine_version(config: Mapping[str, Any], detected: str | None) -> str | None:
    """What changes the engine's behaviour besides its flags, as one string: a real engine's
    name and version as detected where the server runs (engine.python) or as given; for the
    simulator, the specgrid release, the SGLang version it imitates and a digest of the
    CONTENT of its server, hardware and model profiles. None for an external server (recorded
    from its /server_info when it runs)."""
    engine = config["engine"]
    kind = engines.get(engine["name"])
    if not kind.launches:
        return None
    if not kind.simulated:
        return f"{kind.name} {detected or engine.get('version') or 'unknown'}"
    if engine["name"] == "sim":
        args = engine.get("sim_args") or {}
        return sim_version(str(args.get("profile") or "default"), args.get("hardware"),
                           args.get("model"))
    return None


def sim_version(profile: str, hardware: str | None = None, model: str | None = None) -> str:
    """The simulator's identity; ConfigError (before anything starts) when a profile is
    missing or unusable. Read anew each time: a profile edited between two plans must give
    new cells."""
    # Imported here: the simulator's modules are needed only for simulated runs.
    from engines.sim.cli import SIM_VERSION
    from engines.sim.profile import load_profile

    try:
        prof = load_profile(profile, hardware, model)
    except ValueError as e:
        raise ConfigError(f"engine.sim_args: {e}") from None
    content = json.dumps([prof.data, prof.hardware_data, prof.model_data], sort_keys=True)
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    return (f"sim {SIM_VERSION} (specgrid {specgrid_version()}), profile {prof.path.stem} "
            f"on {prof.hardware_data.get('name')} / {prof.model_data.get('name')}@{digest}")


@functools.lru_cache(maxsize=1)
def specgrid_version() -> str:
    """The installed package's version; in a source checkout, pyproject.toml's."""
    try:
        return importlib.metadata.version("specgrid")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
