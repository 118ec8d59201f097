"""The values a composed config may hold beyond its types: the `Literal` choices of the schema's
`str` fields (OmegaConf cannot type a field as `Literal`), the engine and its own options, and
the numbers that can be meant (a negative SLO or a probability above 1 cannot), checked by
`check_choices` right after composition, before anything expensive starts."""

from __future__ import annotations

from typing import Any, Literal, get_args

from omegaconf import DictConfig, OmegaConf

import engines
from engines.options import OptionError, range_problem
from grid.plan.config import ConfigError

Device = Literal["cuda", "cpu"]
Endpoint = Literal["generate", "chat"]
Arrival = Literal["poisson", "gamma", "constant", "trace"]
WorkloadKind = Literal["prompts", "conversations"]
Replay = Literal["recorded", "live"]
ThinkTime = Literal["trace", "none", "constant", "exponential"]
Template = Literal["chatml", "llama3"]
InputShaping = Literal["filter", "fit"]
Transport = Literal["raw", "aiohttp", "httpx"]
ClusterKind = Literal["local", "ray"]


_CHOICES: dict[str, Any] = {
    "engine.device": Device,
    "workload.endpoint": Endpoint,
    "load.arrival": Arrival,
    "workload.input_shaping": InputShaping,
    "load.transport": Transport,
    "workload.kind": WorkloadKind,
    "workload.replay": Replay,
    "workload.think_time": ThinkTime,
    "workload.template": Template,
    "cluster.kind": ClusterKind,
}


def check_choices(cfg: DictConfig | dict[str, Any]) -> None:
    """Raise ConfigError if a choice field holds a value outside its Literal, names an engine
    that engines/ does not have, gives that engine an option it does not take, or a number is
    outside its range (`check_ranges`, run here so that every place that checks the choices
    checks the ranges too)."""
    name = OmegaConf.select(cfg, "engine.name") if isinstance(cfg, DictConfig) \
        else _dig(cfg, "engine.name")
    if name not in engines.names():
        raise ConfigError(f"engine.name={name!r} is not one of {', '.join(engines.names())}")
    check_engine_options(name, _select(cfg, "engine.options"))
    for key, alias in _CHOICES.items():
        value = OmegaConf.select(cfg, key) if isinstance(cfg, DictConfig) else _dig(cfg, key)
        allowed = get_args(alias)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not one of {', '.join(allowed)}")
    check_ranges(cfg)


def check_engine_options(name: str, options: Any) -> None:
    """The engine's own check of `engine.options` (engines/options.py), as one ConfigError
    line that names the key (`engine.options.time_scale must be >= 0, got -1`)."""
    if isinstance(options, DictConfig):
        options = OmegaConf.to_container(options, resolve=True)
    try:
        engines.get(name).check_options(options or {})
    except OptionError as e:
        raise ConfigError(f"engine.options.{e}") from None


_RANGES: dict[str, str] = {
    # engine
    "engine.ready_timeout_s": "> 0",
    "engine.stop_timeout_s": "> 0",
    # model, variant
    "model.tp_size": ">= 1",
    "variant.tp_size": ">= 1",
    "variant.speculative_disable_above_batch": ">= 1",
    # workload
    "workload.max_new_tokens": ">= 1",
    "workload.temperature": ">= 0",
    "workload.max_turns": ">= 1",
    "workload.think_time_s": ">= 0",
    "workload.time_scale": "> 0",
    # load (concurrency, rate, clients, client_cpus, keepalive_s, num_requests, ca_bundle:
    # grid/plan/build.py and specs.py, with their own words; docs/checks.md)
    "load.max_in_flight": ">= 1",
    "load.burstiness": "> 0",
    "load.requests_per_stream": "> 0",
    "load.min_requests": ">= 1",
    "load.duration_s": "> 0",
    "load.max_requests": ">= 1",
    "load.check_interval_s": "> 0",
    "load.warmup_requests": ">= 0",
    "load.request_timeout_s": "> 0",
    "load.repeat": ">= 0",
    # run (max_server_starts: grid/plan/build.py)
    "run.max_error_rate": "[0, 1]",
    "run.cell_timeout_s": "> 0",
    "run.call_timeout_s": "> 0",
    "run.metrics_interval_s": "> 0",
    "run.telemetry_interval_s": "> 0",
    # grid.search (kind and range: grid/plan/search.py)
    "grid.search.resolution": "> 1",
    "grid.search.max_cells": ">= 2",
    "grid.search.coarse_levels": ">= 2",
    # slo
    "slo.ttft_ms": "> 0",
    "slo.tpot_ms": "> 0",
    "slo.e2e_ms": "> 0",
    # hardware
    "hardware.gpu_hour_usd": "> 0",
    # cluster
    "cluster.num_gpus": ">= 0",
    "cluster.num_cpus": ">= 1",
}
"""Numeric keys -> the values that can be meant: `> x`, `>= x` or `[lo, hi]` (both ends
included). A key that is unset (None) is not checked; NaN never passes. Checked by
`check_ranges` right after `check_choices`; an engine checks its own options
(`engine.options`); the full list of what is checked where is docs/checks.md."""


def check_ranges(cfg: DictConfig | dict[str, Any]) -> None:
    """Raise ConfigError (one line: `slo.ttft_ms must be > 0, got -1`) for the first key of
    `_RANGES` whose value is outside its rule."""
    for key, rule in _RANGES.items():
        value = _select(cfg, key)
        if value is not None and (problem := range_problem(key, rule, value)):
            raise ConfigError(problem)


def _select(cfg: DictConfig | dict[str, Any], dotted: str) -> Any:
    """The value at `dotted`, None where a part is missing."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.select(cfg, dotted, default=None)
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _dig(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d
