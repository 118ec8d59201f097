"""The simulator behind the engine interface (engines/base.py): `python -m engines.sim` with the
same SGLang flags a real server would get (spelled as given: it has no version), plus its
`--sim-*` flags; SGLang's metric names, endpoints and plan warnings (it stands in for SGLang)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engines.base import SGLANG_METRICS, DepthSetting, Engine, ServerRequest
from engines.launch import Endpoints, LaunchSpec
from engines.sglang.adaptive import honoured_thresholds
from engines.sglang.command import build_sim_launch, speculation_on
from engines.sglang.engine import (
    adaptive_problem,
    schedule_setting,
    sglang_warnings,
    speculation_kwargs,
)
from engines.sim.profile import gpu_memory_gib


class Sim(Engine):
    name = "sim"
    label = "simulated SGLang"
    simulated = True
    start_estimate_s = 4.0
    endpoints = Endpoints()
    metrics = SGLANG_METRICS

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        spec = build_sim_launch(
            args=request.args, env=request.env, model_path=request.model_path,
            draft_model_path=request.draft_model_path,
            served_model_name=request.served_model_name, tp_size=request.tp_size,
            python=request.python, ready_timeout_s=request.ready_timeout_s,
            disable_above_batch=request.disable_above_batch,
            sim_args=request.options.get("sim_args") or {}, host=request.host,
            api_key=request.api_key, stop_timeout_s=request.stop_timeout_s,
            revision=request.revision, draft_revision=request.draft_revision,
            **speculation_kwargs(request))
        return replace(spec, endpoints=self.endpoints)

    def gpus(self, tp_size: int, device: str) -> int:
        """The simulator models GPUs it does not use: it reserves the logical GPUs of its
        placement, so parallel server groups pack as they would on a real node."""
        return tp_size

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        return sglang_warnings(variant, concurrencies)

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """As SGLang's (the simulator routes batches the same way, engines/sim/core.py), with
        the max_bs SGLang would pick for the modelled GPU's memory."""
        args = variant.get("args") or {}
        if not speculation_on(args):
            return None
        memory = gpu_memory_gib(hardware) if hardware else None
        return honoured_thresholds(args, None if memory is None else memory * 1024)

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """As SGLang's, with the max_bs SGLang would pick for the modelled GPU's memory (the
        simulator pads and routes the same way, engines/sim/core.py)."""
        hardware = (request.options.get("sim_args") or {}).get("hardware")
        memory = gpu_memory_gib(str(hardware)) if hardware else None
        return schedule_setting(self.name, request, None if memory is None else memory * 1024)

    def adaptive_refusal(self, variant: Mapping[str, Any]) -> str | None:
        return adaptive_problem(variant)


ENGINE = Sim()
