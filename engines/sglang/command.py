"""Command lines for an SGLang server (or the simulator standing in for one), as LaunchSpecs.

Pure: a `speculative_disable_above_batch` threshold's adaptive config JSON travels as content in
the LaunchSpec's `files` (content-addressed name, see `engines.sglang.adaptive`); the command
names it under `engines.launch.FILES_DIR`, and the ServerActor writes it on the server's node.

What every SGLang server gets, and why:
- `--model-path`, `--served-model-name` (when given), `--tp-size`; `--revision` and
  `--speculative-draft-model-revision` when the model config pins them;
- `--base-gpu-id 0`: Ray's CUDA_VISIBLE_DEVICES already narrows the devices, and SGLang counts
  GPU ids among the visible ones;
- `--host` from the engine config (default 127.0.0.1: load generators run on the same node);
- no `--api-key`: the ServerActor appends it (`LaunchSpec.api_key_flag`), so no planned
  command holds a secret;
- `--max-running-requests` always explicit, on baseline and speculative servers alike: without
  it SGLang silently caps EAGLE/EAGLE3/NEXTN/STANDALONE servers at 48 running requests, which
  makes a comparison at high concurrency unfair. It comes from the variant's args; without it,
  FlagError;
- `--speculative-draft-model-path` from the model config only for algorithms that take a draft
  model (EAGLE, EAGLE3, STANDALONE); a variant may override it in its args;
- `--enable-metrics` (the telemetry scrapes /metrics);
- no `--port`/`--nccl-port`: the ServerActor appends free ports (`port_flag`,
  `extra_port_flags`); readiness is `GET /health_generate` (a real 1-token generation).
`sglang serve` also gets `--model-type llm`, which skips diffusion-model detection (that flag is
consumed by `sglang serve` itself, not by ServerArgs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from engines.depth import DepthTiers
from engines.launch import FILES_DIR, LaunchSpec, ServerRequest, env_value
from engines.sglang import adaptive, depth
from engines.sglang.flags import flag_name, server_args_to_argv
from engines.sglang.logphases import SGLANG_LOG_PHASES, SGLANG_STARTUP_TIMINGS
from engines.validation import FlagError

Launcher = Literal["serve", "launch_server"]

DRAFT_MODEL_ALGORITHMS: tuple[str, ...] = ("EAGLE", "EAGLE3", "STANDALONE")
"""Speculative algorithms that load a separate draft model."""

RESERVED_FIELDS: dict[str, str] = {
    "model_path": "the model config's model_path",
    "served_model_name": "the model config's served_model_name",
    "tp_size": "the variant's or model's tp_size",
    "tp": "the variant's or model's tp_size",
    "tensor_parallel_size": "the variant's or model's tp_size",
    "base_gpu_id": "specgrid (always 0 among Ray's visible GPUs)",
    "host": "the engine config's host",
    "port": "the ServerActor (a free port)",
    "nccl_port": "the ServerActor (a free port)",
    "api_key": "the engine config's api_key",
    "revision": "the model config's revision",
    "enable_metrics": "specgrid (always on)",
}
"""Variant args that specgrid sets itself; a variant giving one is a FlagError."""


def concurrency_warnings(max_running_requests: int, concurrencies: Iterable[int]) -> list[str]:
    """One warning per concurrency above the server's running-request cap: the excess waits
    in the server's queue, so TTFT includes queueing and throughput plateaus at the cap."""
    return [
        f"concurrency {c} exceeds max_running_requests {max_running_requests}: "
        f"{c - max_running_requests} requests wait in the server queue (TTFT includes queueing)"
        for c in sorted(set(concurrencies))
        if c > max_running_requests
    ]


def threshold_warnings(disable_above_batch: int, max_running_requests: int) -> list[str]:
    """A speculation threshold at or above the running-request cap never switches off."""
    if disable_above_batch >= max_running_requests:
        return [
            f"speculative_disable_above_batch {disable_above_batch} >= max_running_requests "
            f"{max_running_requests}: speculation is never switched off"
        ]
    return []


def speculation_on(args: Mapping[str, Any]) -> bool:
    """Whether the variant's args turn on speculative decoding."""
    return args.get("speculative_algorithm") not in (None, "", "NONE", "none")


def server_args(request: ServerRequest, adaptive_config: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """All ServerArgs fields of one server: the variant's args (`request.args`) plus what
    specgrid sets (module docstring), spelled for `request.version` (None = as given). A
    threshold, a depth schedule or an adaptive config (`adaptive_config`, read by
    `read_adaptive`) names its file under FILES_DIR (`speculation_setting`)."""
    args, version, tp_size = request.args, request.version, request.tp_size
    for field, owner in RESERVED_FIELDS.items():
        if field in args:
            raise FlagError(f"{field} is set by {owner}, not by a variant's args", field=field,
                            version=version)
    mrr = args.get("max_running_requests")
    if not isinstance(mrr, int) or isinstance(mrr, bool) or mrr < 1:
        raise FlagError(
            "max_running_requests must be explicit (an int >= 1, in the variant's args): "
            f"SGLang silently caps speculative servers at 48 without it, got {mrr!r}",
            field="max_running_requests", version=version)
    if not isinstance(tp_size, int) or isinstance(tp_size, bool) or tp_size < 1:
        raise FlagError(f"tp_size must be an int >= 1, got {tp_size!r}", field="tp_size",
                        version=version)
    out: dict[str, Any] = {
        "model_path": request.model_path,
        "served_model_name": request.served_model_name,
        "tp_size": tp_size,
        "base_gpu_id": 0,
        "host": request.host,
        "enable_metrics": True,
        "revision": request.revision,
        **{str(k): v for k, v in args.items()},
        "max_running_requests": mrr,
    }
    algo = args.get("speculative_algorithm")
    if speculation_on(args) and str(algo).upper() in DRAFT_MODEL_ALGORITHMS:
        draft = args.get("speculative_draft_model_path", request.draft_model_path)
        if not draft:
            raise FlagError(f"speculative_algorithm {algo} needs a draft model: set the model "
                            "config's draft_model_path", field="speculative_draft_model_path",
                            version=version)
        out["speculative_draft_model_path"] = draft
        if request.draft_revision and "speculative_draft_model_revision" not in args:
            out["speculative_draft_model_revision"] = request.draft_revision
    elif not speculation_on(args) and args.get("speculative_draft_model_path"):
        raise FlagError("speculative_draft_model_path given without speculative_algorithm",
                        field="speculative_draft_model_path", version=version)
    extra, _ = speculation_setting(out, request.disable_above_batch, request.depth_schedule,
                                   request.adaptive, adaptive_config, version)
    out.update(extra)
    return out


def speculation_setting(
    args: Mapping[str, Any], disable_above_batch: int | None, depth_schedule: DepthTiers | None,
    adaptive_on: bool, adaptive_config: Mapping[str, Any] | None, version: str | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The args (and the files under FILES_DIR they name) that set the speculative depth by
    batch size: a threshold (`adaptive.threshold_config`), a schedule pinned per tier
    (engines/sglang/depth.py) or SGLang's own adaptation, with its config or SGLang's default;
    a config file's name is content-addressed (`depth.config_file`). At most one of them;
    FlagError otherwise, or for a variant SGLang would not honour it on."""
    asked = [name for name, on in (
        ("speculative_disable_above_batch", disable_above_batch is not None),
        ("speculative_depth", depth_schedule is not None),
        ("speculative_adaptive", adaptive_on)) if on]
    if len(asked) > 1:
        raise FlagError(f"{asked[0]} and {asked[1]} both set the speculative depth by batch "
                        "size; give one", field=asked[1], version=version)
    if depth_schedule is not None:
        name, text = depth.schedule_file(args, depth_schedule, version)
        return (depth.schedule_args(args, depth_schedule, version, f"{FILES_DIR}/{name}"),
                {name: text})
    if disable_above_batch is not None:
        steps = adaptive.check_threshold_args(args, disable_above_batch, version)
        adaptive_config = adaptive.threshold_config(steps, disable_above_batch)
    elif adaptive_on:
        depth.check_adaptive_args(args, adaptive_config, version)
        if adaptive_config is None:  # SGLang's default tiers
            return {"speculative_adaptive": True}, {}
    else:
        return {}, {}
    name, text = depth.config_file(adaptive_config)
    return ({"speculative_adaptive": True,
             "speculative_adaptive_config": f"{FILES_DIR}/{name}"}, {name: text})


def sglang_program(python: str, launcher: Launcher) -> list[str]:
    """The program part of the command: the `sglang` console script beside `python`
    (`sglang serve --model-type llm`) or `python -m sglang.launch_server`."""
    if launcher == "launch_server":
        return [python, "-m", "sglang.launch_server"]
    if launcher != "serve":
        raise FlagError(f"launcher must be 'serve' or 'launch_server', got {launcher!r}")
    parent = Path(python).parent
    script = str(parent / "sglang") if str(parent) not in ("", ".") else "sglang"
    return [script, "serve", "--model-type", "llm"]


def read_adaptive(request: ServerRequest) -> Mapping[str, Any] | None:
    """The variant's adaptive config file (`request.adaptive_config`), read and checked at plan
    time; None for SGLang's default tiers or no adaptation."""
    config = depth.read_config(request.adaptive_config) if request.adaptive_config else None
    if config is not None and not request.adaptive:
        raise ValueError("speculative_adaptive_config is given without speculative_adaptive")
    return config


def build_sglang_launch(request: ServerRequest, launcher: Launcher = "serve") -> LaunchSpec:
    """The LaunchSpec of one real SGLang server (module docstring for what it always gets):
    `request.args` are ServerArgs field names of the variant, `request.env` its environment
    over the node's, spelled for `request.version` (None = as given). Raises FlagError for
    args the version lacks, reserved fields, a missing max_running_requests or a threshold
    the variant cannot have (`engines.sglang.adaptive.check_threshold_args`)."""
    return _launch(request, sglang_program(request.python, launcher), [], "/health_generate",
                   ("--nccl-port",))


def _launch(request: ServerRequest, program: list[str], tail: list[str], health_path: str,
            extra_port_flags: tuple[str, ...]) -> LaunchSpec:
    """The LaunchSpec of `program` with the server's flags (`server_args`) and `tail`; its
    files are those of `speculation_setting`."""
    config = read_adaptive(request)
    fields = server_args(request, config)
    _, files = speculation_setting(request.args, request.disable_above_batch,
                                   request.depth_schedule, request.adaptive, config,
                                   request.version)
    return LaunchSpec(
        argv=program + server_args_to_argv(fields, request.version) + tail,
        env={str(k): env_value(v) for k, v in request.env.items() if v is not None},
        port_flag="--port",
        extra_port_flags=extra_port_flags,
        health_path=health_path,
        ready_timeout_s=float(request.ready_timeout_s),
        stop_timeout_s=float(request.stop_timeout_s),
        log_phases=SGLANG_LOG_PHASES,
        startup_timings=SGLANG_STARTUP_TIMINGS,
        host=request.host,
        api_key=request.api_key,
        files=files,
    )


def sim_flags(sim_options: Mapping[str, Any]) -> list[str]:
    """`{profile: default, seed: 0}` -> `--sim-profile default --sim-seed 0` (sorted; a key
    may already carry the `sim_` prefix; True is a bare switch, False/None omitted)."""
    named: dict[str, Any] = {}
    for key, value in sim_options.items():
        name = str(key).replace("-", "_")
        named["sim_" + (name[4:] if name.startswith("sim_") else name)] = value
    return server_args_to_argv(named, None)


def build_sim_launch(request: ServerRequest, sim_options: Mapping[str, Any]) -> LaunchSpec:
    """The LaunchSpec of the simulator: `python -m engines.sim` with the same SGLang flags a
    real server would get (spelled as given: the simulator has no version), then the
    `--sim-*` flags from `sim_options`. Readiness is `GET /health`; no NCCL port."""
    return _launch(replace(request, version=None), [request.python, "-m", "engines.sim"],
                   sim_flags(sim_options), "/health", ())


__all__ = [
    "build_sglang_launch",
    "build_sim_launch",
    "concurrency_warnings",
    "flag_name",
    "server_args",
    "threshold_warnings",
]
