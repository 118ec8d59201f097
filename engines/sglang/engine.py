"""SGLang behind the engine interface (engines/base.py): command lines per version
(engines/sglang/command.py, flags.py, versions.py), SGLang's own parser (validate.py), start-up
log phases (logphases.py), the speculation threshold's semantics (adaptive.py), metric names.

On the CPU (`engine.device=cpu`: tiny models, CI) SGLang 0.5.23 serves through its generic
device path: `--device cpu --attention-backend torch_native` (its own CPU engine,
`SGLANG_USE_CPU_ENGINE=1`, needs a CPU build of sgl-kernel that no registry package provides,
and its default x86 attention backend needs Intel AMX), with a bounded KV pool and context
(CPU_DEFAULTS, a variant's own values win). Speculative decoding does not run there (its kernels
need CUDA/Triton): a speculative variant on the CPU is refused in the plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, get_args

from engines.base import Engine
from engines.depth import DepthSetting
from engines.launch import Endpoints, LaunchSpec, ServerRequest
from engines.metrics import SGLANG_METRICS
from engines.options import Option
from engines.sglang import adaptive, depth, validate
from engines.sglang.command import (
    Launcher,
    build_sglang_launch,
    concurrency_warnings,
    speculation_on,
    threshold_warnings,
)
from engines.sglang.flags import server_args_to_argv
from engines.validation import FlagError, FlagProblem

OPTIONS: dict[str, Option] = {
    "launcher": Option("how SGLang is started: `sglang serve` or `python -m "
                       "sglang.launch_server` (serve when unset)", types=(str,),
                       choices=get_args(Launcher)),
}
"""SGLang's own settings (`engine.options`)."""

CPU_DEFAULTS: dict[str, Any] = {"device": "cpu", "attention_backend": "torch_native",
                                "max_total_tokens": 16384, "context_length": 4096}
"""ServerArgs of an SGLang server on the CPU: the generic device path (module docstring), a KV
pool of 16k tokens (a tiny model's pool is a few MB; unbounded, SGLang sizes it from the free
memory of a GPU it does not have) and a context of 4096 tokens (the positions of the tiny
models scripts/tiny_models.py builds)."""


def sglang_warnings(variant: Mapping[str, Any], concurrencies: Sequence[int]) -> list[str]:
    """The running-request cap and the speculation threshold, as SGLang reads them (the
    simulator, which stands in for SGLang, gets the same)."""
    name, args = variant["name"], variant.get("args") or {}
    out = []
    cap = args.get("max_running_requests")
    if isinstance(cap, int):
        out += [f"{name}: {w}" for w in concurrency_warnings(cap, concurrencies)]
        if variant.get("speculative_disable_above_batch") is not None:
            out += [f"{name}: {w}" for w in threshold_warnings(
                variant["speculative_disable_above_batch"], cap)]
    return out + adaptive.threshold_notes(name, variant) + depth.depth_notes(name, variant)


def speculation_kwargs(request: ServerRequest) -> dict[str, Any]:
    """The depth-by-batch settings of a request as the command builders take them (the
    adaptive config file read and checked here, at plan time)."""
    config = depth.read_config(request.adaptive_config) if request.adaptive_config else None
    if config is not None and not request.adaptive:
        raise ValueError("speculative_adaptive_config is given without speculative_adaptive")
    return {"depth_schedule": request.depth_schedule, "adaptive_on": request.adaptive,
            "adaptive_config": config}


def schedule_setting(engine: str, request: ServerRequest, gpu_memory_mib: float | None
                     ) -> DepthSetting | None:
    """The SGLang flags and adaptive config file that pin `request.depth_schedule`, and the
    depth each running batch gets as SGLang routes it (padding to the speculative capture list
    of the variant's max_bs). FlagError for a variant SGLang cannot pin it on."""
    tiers = request.depth_schedule
    if tiers is None:
        return None
    args = request.args
    name, text = depth.schedule_file(args, tiers, request.version)
    fields = depth.schedule_args({k: args[k] for k in (
        "speculative_algorithm", "speculative_eagle_topk") if k in args}, tiers,
        request.version, name)
    graphs = depth.capture_sizes(args, gpu_memory_mib)
    routed = depth.effective_tiers(depth.schedule_config(tiers), graphs,
                                   fields["speculative_num_steps"])
    return DepthSetting(engine, tuple(server_args_to_argv(fields, request.version)),
                        {name: text}, tuple(routed))


def adaptive_problem(variant: Mapping[str, Any]) -> str | None:
    """Why SGLang would not run its adaptive speculation for `variant` (None: it would)."""
    try:
        depth.check_adaptive_args(variant.get("args") or {}, None, None)
    except FlagError as e:
        return str(e)
    return None


class SGLang(Engine):
    name = "sglang"
    label = "SGLang"
    endpoints = Endpoints()
    metrics = SGLANG_METRICS
    options = OPTIONS

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        args = dict(request.args)
        if request.device == "cpu":
            if speculation_on(args):
                raise ValueError("SGLang's speculative decoding does not run on the CPU (its "
                                 "kernels need CUDA): use engine=vllm or a baseline variant")
            args = {**CPU_DEFAULTS, **args}
        spec = build_sglang_launch(
            args=args, env=request.env, model_path=request.model_path,
            draft_model_path=request.draft_model_path,
            served_model_name=request.served_model_name, tp_size=request.tp_size,
            version=request.version, launcher=request.options.get("launcher") or "serve",
            python=request.python, ready_timeout_s=request.ready_timeout_s,
            disable_above_batch=request.disable_above_batch, host=request.host,
            api_key=request.api_key, stop_timeout_s=request.stop_timeout_s,
            revision=request.revision, draft_revision=request.draft_revision,
            **speculation_kwargs(request))
        return replace(spec, endpoints=self.endpoints)

    def detect_version(self, python: str) -> str | None:
        return validate.sglang_available(python)

    def validate(self, argvs: Mapping[str, Sequence[str]], python: str
                 ) -> tuple[str, bool, list[FlagProblem]]:
        return validate.check_batch(argvs, python)

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        out = sglang_warnings(variant, concurrencies)
        if "CUDA_DEVICE_MAX_CONNECTIONS" in (variant.get("env") or {}):
            out.append(f"{variant['name']}: SGLang overwrites CUDA_DEVICE_MAX_CONNECTIONS=8 at "
                       "start-up; this setting has no effect on the server")
        return out

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """SGLang's speculative CUDA-graph capture sizes (engines/sglang/adaptive.py
        `honoured_thresholds`; the GPU's memory is not known here: SGLang's default max_bs for
        an unknown GPU, 160, unless the variant sets cuda_graph_max_bs)."""
        args = variant.get("args") or {}
        return adaptive.honoured_thresholds(args) if speculation_on(args) else None

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """SGLang's adaptive config with one candidate per tier (engines/sglang/depth.py); the
        routing is SGLang's for an unknown GPU (max_bs 160) unless the variant sets
        cuda_graph_max_bs."""
        return schedule_setting(self.name, request, None)

    def adaptive_refusal(self, variant: Mapping[str, Any]) -> str | None:
        return adaptive_problem(variant)


ENGINE = SGLang()
