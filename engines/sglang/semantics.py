"""SGLang's semantics that the simulator shares: it stands in for SGLang, so it reads the same
flags, warns the same way, routes a running batch to the same speculative depth and launches
with the same command line. This is the one module of engines/sglang/ that engines/sim/ imports
(import-linter holds it to that, pyproject.toml); SGLang's own engine builds on it too.

The routing (`load_tiers`, `route`, `candidate_steps`, `decode_capture_sizes`,
`default_decode_max_bs`) is engines/sglang/adaptive.py's and the command line
(`build_sim_launch`, `speculation_on`) engines/sglang/command.py's, the forced acceptance's
environment (`forced_env`, `refuse_raw_env`) engines/sglang/forced.py's; what both engines answer
from them (their plan warnings, the depth-by-batch setting, the thresholds they tell apart) is
defined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engines.depth import DepthSetting
from engines.launch import ServerRequest
from engines.sglang import adaptive, depth
from engines.sglang.adaptive import (
    DEFAULT_ADAPTIVE_CONFIG,
    candidate_steps,
    decode_capture_sizes,
    default_decode_max_bs,
    load_tiers,
    route,
)
from engines.sglang.command import (
    build_sim_launch,
    concurrency_warnings,
    speculation_on,
    threshold_warnings,
)
from engines.sglang.flags import server_args_to_argv
from engines.sglang.forced import forced_env, refuse_raw_env

SPEC_DETAILS: Mapping[str, Any] = {"return_spec_tokens_details": True}
"""What a chat request adds to get its speculative counts: SGLang 0.5.23 sends them (with
`spec_correct_drafts_histogram`, a drafter's per-position profile) on the OpenAI stream only when
the body asks (`python/sglang/srt/entrypoints/openai/protocol.py` ChatCompletionRequest
`return_spec_tokens_details`, `serving_chat.py`); the native /generate always sends them."""

__all__ = [
    "DEFAULT_ADAPTIVE_CONFIG", "SPEC_DETAILS", "build_sim_launch", "candidate_steps",
    "decode_capture_sizes", "default_decode_max_bs", "forced_env", "load_tiers",
    "refuse_raw_env", "route",
    "schedule_setting", "sglang_warnings", "speculation_on",
    "threshold_values",
]


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
    graphs = adaptive.capture_sizes(args, gpu_memory_mib)
    routed = adaptive.effective_tiers(depth.schedule_config(tiers), graphs,
                                      fields["speculative_num_steps"])
    return DepthSetting(engine, tuple(server_args_to_argv(fields, request.version)),
                        {name: text}, tuple(routed))


def threshold_values(args: Mapping[str, Any], gpu_memory_mib: float | None = None
                     ) -> list[int] | None:
    """The `speculative_disable_above_batch` values SGLang tells apart for a variant's `args`:
    its speculative CUDA-graph capture sizes (adaptive.py `honoured_thresholds`, with the max_bs
    SGLang picks for `gpu_memory_mib`; None = an unknown GPU), or None when it does not
    speculate."""
    return adaptive.honoured_thresholds(args, gpu_memory_mib) if speculation_on(args) else None
