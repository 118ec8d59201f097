"""The simulator behind the engine interface (engines/base.py): `python -m engines.sim` with the
same SGLang flags a real server would get (spelled as given: it has no version), plus its
`--sim-*` flags from `engine.options` (engines/sim/options.py); SGLang's metric names,
endpoints, parser and plan warnings (it stands in for SGLang); its identity from its profiles'
content (identity.py). Its model (estimates, envelope, twins) answers in modeller.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from engines.base import Engine
from engines.depth import DepthSetting
from engines.launch import Endpoints, LaunchSpec, ServerRequest
from engines.metrics import SGLANG_METRICS
from engines.sglang import semantics
from engines.sim import options as sim_options
from engines.sim.identity import sim_version
from engines.sim.model import FORCED_RATES_ENV
from engines.sim.profile import gpu_memory_gib


def _memory_mib(hardware: str | None) -> float | None:
    """The memory of the modelled GPU kind in MiB, as SGLang reads a GPU's to pick its max_bs
    (None: no hardware profile named, or one without a memory)."""
    memory = gpu_memory_gib(hardware) if hardware else None
    return None if memory is None else memory * 1024


class Sim(Engine):
    name = "sim"
    label = "simulated SGLang"
    start_estimate_s = 4.0
    endpoints = Endpoints()
    chat_extras = semantics.SPEC_DETAILS
    metrics = SGLANG_METRICS
    options = sim_options.OPTIONS
    flags_of = "sglang"

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        options = dict(request.options)
        profile = str(options.get("profile") or "")
        if profile.endswith(".json") or "/" in profile:  # a file: the server's cwd may differ
            options["profile"] = str(Path(profile).resolve())
        spec = semantics.build_sim_launch(replace(request, env=forced_sim_env(request)),
                                          options)
        return replace(spec, endpoints=self.endpoints, start_seed_flag="--sim-start-seed")

    def check_options(self, options: Mapping[str, Any]) -> None:
        """The `--sim-*` flags it has, with values they take, and profiles that load."""
        sim_options.check(options)

    def clock_scale(self, options: Mapping[str, Any]) -> float:
        """`time_scale` (every modelled duration times it); 0 (no step cost) keeps the wall's
        clock: there is no modelled time to report on."""
        scale = float(options.get("time_scale") or 0.0)
        return scale if scale > 0 else 1.0

    def version_label(self, options: Mapping[str, Any], version: str | None) -> str | None:
        """The simulator's release and its profiles' content (identity.py); the SGLang
        version it imitates is its own, whatever `version` says."""
        return sim_version(str(options.get("profile") or "default"), options.get("hardware"),
                           options.get("model"))

    def gpus(self, tp_size: int, device: str) -> int:
        """The simulator models GPUs it does not use: it reserves the logical GPUs of its
        placement, so parallel server groups pack as they would on a real node."""
        return tp_size

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        return semantics.sglang_warnings(variant, concurrencies)

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """As SGLang's (the simulator routes batches the same way, engines/sim/core.py), with
        the max_bs SGLang would pick for the modelled GPU's memory."""
        return semantics.threshold_values(variant.get("args") or {}, _memory_mib(hardware))

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """As SGLang's, with the max_bs SGLang would pick for the modelled GPU's memory (the
        simulator pads and routes the same way, engines/sim/core.py)."""
        hardware = request.options.get("hardware")
        return semantics.schedule_setting(self.name, request,
                                          _memory_mib(str(hardware) if hardware else None))


ENGINE = Sim()


def forced_sim_env(request: ServerRequest) -> dict[str, Any]:
    """The variant's environment with its forced acceptance in the simulator's words: a mean
    length as SGLang's SGLANG_SIMULATE_ACC_* (which the simulator honours as SGLang does),
    per-position rates as its own FORCED_RATES_ENV (its drafter replaced, step costs kept)."""
    semantics.refuse_raw_env(request.env)
    if FORCED_RATES_ENV in request.env:
        raise ValueError(f"variant.env.{FORCED_RATES_ENV}: force acceptance with "
                         "variant.forced_acceptance.rates (labelled and checked), not by hand")
    forced = request.forced
    if forced is None:
        return dict(request.env)
    if forced.rates is None:
        return {**request.env, **semantics.forced_env(forced)}
    return {**request.env, FORCED_RATES_ENV: ",".join(repr(r) for r in forced.rates)}
