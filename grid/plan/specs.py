"""From a cell's resolved config to what runs: the server's LaunchSpec, the load generators'
LoadSpecs and the engine version that belongs to the cell's identity. Built at plan time, so
building them is the check: a spec that cannot be built is a plan error, before anything
starts. Pure: no Ray, no sockets, nothing written."""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import engines
from actors.loadgen.spec import LoadSpec, Prompt
from engines.depth import depth_schedule
from engines.forced import forced_acceptance
from engines.launch import LaunchSpec, ServerRequest
from engines.validation import FlagError
from grid.plan.cells import Cell, resolved_tp_size
from grid.plan.config import ConfigError
from grid.plan.stopping import targets_of

PLANNED_URL = "http://server.planned"
"""The URL in a planned LoadSpec; the controller puts the server's real URL in its place."""

# LoadSpec field -> the config key a user sets, so a rejected spec names what to change.
_SPEC_KEYS = {
    "warmup_requests": "load.warmup_requests", "num_requests": "load.num_requests",
    "duration_s": "load.duration_s", "burstiness": "load.burstiness", "rate": "load.rate",
    "max_new_tokens": "workload.max_new_tokens", "request_timeout_s": "load.request_timeout_s",
    "prompts": "workload.prompts", "endpoint": "workload.endpoint", "arrival": "load.arrival",
    "api_key": "engine.api_key", "min_requests": "load.min_requests",
    "check_interval_s": "load.check_interval_s", "target": "load.target",
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
        if any(dict(variant.get("forced_acceptance") or {}).values()):
            given.append("forced_acceptance")
        if given:
            raise ConfigError(f"variant {variant['name']}: {given[0]} needs a server specgrid "
                              f"launches; {kind.label} is run by someone else")
        return None
    try:
        return kind.launch_spec(server_request(config, version))
    except (FlagError, ConfigError):
        raise  # an engine's flag errors name the field and version; the plan reports them
    except ValueError as e:
        raise ConfigError(f"variant {variant['name']} on {kind.label}: {e}") from None


def server_request(config: Mapping[str, Any], version: str | None = None) -> ServerRequest:
    """The plain values an engine spells a server from, out of a cell's resolved config.
    ValueError (one line) for a depth schedule that is not one, or a forced acceptance the
    variant cannot take (engines/forced.py)."""
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
        draft_revision=model.get("draft_revision"), options=engine.get("options") or {},
        depth_schedule=None if raw_depth is None else depth_schedule(raw_depth),
        adaptive=bool(variant.get("speculative_adaptive")),
        adaptive_config=variant.get("speculative_adaptive_config"),
        forced=forced_acceptance(variant.get("forced_acceptance"), variant["args"], [
            k for k in ("speculative_disable_above_batch", "speculative_depth",
                        "speculative_adaptive") if variant.get(k) not in (None, False)]))


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


def equivalent_launch(config: Mapping[str, Any], engine: str, version: str | None
                      ) -> LaunchSpec:
    """The command of `engine` (with its default options) that a group stands for, so that
    engine's parser can check the flags of an engine that takes its flags (the simulator
    takes SGLang's)."""
    as_other = dict(config)
    as_other["engine"] = {**config["engine"], "name": engine, "options": {}}
    # A forced acceptance is the simulator's environment, not a flag (rates it takes, SGLang not)
    as_other["variant"] = {**config["variant"], "forced_acceptance": None}
    spec = launch_spec(as_other, version)
    assert spec is not None
    return spec


def external_url(engine: Mapping[str, Any]) -> str | None:
    """The base URL of a server someone else runs, normalized, from the engine's options
    (None for an engine that launches its own); ConfigError when it is unusable (the options
    check has refused that already)."""
    try:
        return engines.get(engine["name"]).server_url(engine.get("options") or {})
    except ValueError as e:
        raise ConfigError(f"engine.options: {e}") from None


def clock_scale(engine: Mapping[str, Any]) -> float:
    """Wall seconds per second of the engine's clock (engines/base.py `clock_scale`)."""
    return engines.get(engine["name"]).clock_scale(engine.get("options") or {})


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
            clock_scale=clock_scale(config["engine"]),
            extra_body=dict(engines.get(config["engine"]["name"]).chat_extras)
            if workload["endpoint"] == "chat" else {},
            **stop_settings(load),
        )
        return tuple(replace(base, client_index=i) for i in range(clients))
    except ValueError as e:
        raise ConfigError(_config_words(str(e), open_loop) + where) from None


def stop_settings(load: Mapping[str, Any]) -> dict[str, Any]:
    """The LoadSpec fields of the early stop (actors/loadgen/stopping.py)."""
    targets = targets_of(load)
    return {"targets": targets, "min_requests": int(load["min_requests"]) if targets else 0,
            "check_interval_s": float(load.get("check_interval_s", 0.5)),
            "stop_over_saturated": bool(load.get("stop_over_saturated", True))}


def _config_words(message: str, open_loop: bool) -> str:
    message = message.removeprefix("invalid LoadSpec: ")
    keys = dict(_SPEC_KEYS, concurrency="load.max_in_flight" if open_loop else "load.concurrency")
    return re.sub(r"\b(" + "|".join(keys) + r")\b", lambda m: keys[m.group(1)], message)


# --- engine versions (part of a cell's identity) -------------------------------------------
def engine_version(config: Mapping[str, Any], detected: str | None) -> str | None:
    """What changes the engine's behaviour besides its flags, as one string (the engine's
    `version_label`): a real engine's name and version as detected where the server runs
    (engine.python) or as given; for a simulated one what its numbers are modelled from. None
    for an external server (recorded from its /server_info when it runs). ConfigError (before
    anything starts) when the options name something that cannot be read."""
    engine = config["engine"]
    try:
        return engines.get(engine["name"]).version_label(
            engine.get("options") or {}, detected or engine.get("version"))
    except ValueError as e:
        raise ConfigError(f"engine.options: {e}") from None
