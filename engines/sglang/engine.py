"""SGLang behind the engine interface (engines/base.py): command lines per version
(engines/sglang/command.py, flags.py, versions.py), SGLang's own parser (validate.py), start-up
log phases (logphases.py), the speculation threshold's semantics (adaptive.py), what the
simulator shares with it (semantics.py), metric names.

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
from engines.sglang import semantics, validate
from engines.sglang.command import Launcher, build_sglang_launch, speculation_on
from engines.sglang.forced import forced_env, refuse_raw_env
from engines.validation import FlagProblem

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


class SGLang(Engine):
    name = "sglang"
    label = "SGLang"
    endpoints = Endpoints()
    chat_extras = semantics.SPEC_DETAILS
    metrics = SGLANG_METRICS
    options = OPTIONS

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        args = dict(request.args)
        if request.device == "cpu":
            if speculation_on(args):
                raise ValueError("SGLang's speculative decoding does not run on the CPU (its "
                                 "kernels need CUDA): use engine=vllm or a baseline variant")
            args = {**CPU_DEFAULTS, **args}
        refuse_raw_env(request.env)
        env = {**request.env, **(forced_env(request.forced) if request.forced else {})}
        spec = build_sglang_launch(replace(request, args=args, env=env),
                                   request.options.get("launcher") or "serve")
        return replace(spec, endpoints=self.endpoints)

    def detect_version(self, python: str) -> str | None:
        return validate.sglang_available(python)

    def validate(self, argvs: Mapping[str, Sequence[str]], python: str
                 ) -> tuple[str, bool, list[FlagProblem]]:
        return validate.check_batch(argvs, python)

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        out = semantics.sglang_warnings(variant, concurrencies)
        if "CUDA_DEVICE_MAX_CONNECTIONS" in (variant.get("env") or {}):
            out.append(f"{variant['name']}: SGLang overwrites CUDA_DEVICE_MAX_CONNECTIONS=8 at "
                       "start-up; this setting has no effect on the server")
        return out

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """SGLang's speculative CUDA-graph capture sizes (engines/sglang/adaptive.py
        `honoured_thresholds`; the GPU's memory is not known here: SGLang's default max_bs for
        an unknown GPU, 160, unless the variant sets cuda_graph_max_bs)."""
        return semantics.threshold_values(variant.get("args") or {})

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """SGLang's adaptive config with one candidate per tier (engines/sglang/depth.py); the
        routing is SGLang's for an unknown GPU (max_bs 160) unless the variant sets
        cuda_graph_max_bs."""
        return semantics.schedule_setting(self.name, request, None)


ENGINE = SGLang()
