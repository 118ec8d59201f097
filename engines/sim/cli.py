"""Command line of ``python -m engines.sim``: SGLang's flag names for what is modelled, anything
else accepted with a one-line "not modelled" warning, plus the simulator's own ``--sim-*`` flags.

Resolution mirrors SGLang 0.5.23 where it matters for the numbers: topk=1 forces
draft tokens = steps + 1; EAGLE/EAGLE3/NEXTN/STANDALONE without ``--max-running-requests`` are
capped at 48 running requests (logged here, silent in SGLang); adaptive needs EAGLE/EAGLE3 and
topk 1 (otherwise it is dropped with a warning) and ``--speculative-num-steps`` must be one of
the config's candidates (otherwise start-up fails, as in SGLang).
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.sglang.semantics import candidate_steps, default_decode_max_bs
from engines.sim.adaptive import load_adaptive_config
from engines.sim.drafter import parse_mix
from engines.sim.memory import mem_fraction, memory_fit
from engines.sim.options import OPTIONS
from engines.sim.profile import Profile, load_profile
from engines.sim.text import seed_for

SIM_VERSION = "0.5.23-sim"
"""SGLang API version the simulator speaks, marked as a simulation."""
CAPPED_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")

MODELLED_EXTRA_FLAGS: frozenset[str] = frozenset({
    "enable_flashinfer_allreduce_fusion", "flashinfer_allreduce_fusion_backend",
    "disable_custom_all_reduce", "enable_nccl_nvls", "disable_cuda_graph", "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode", "random_seed", "max_total_tokens", "max_prefill_tokens",
    "context_length", "mem_fraction_static", "chunked_prefill_size", "disable_radix_cache",
    "cuda_graph_bs", "cuda_graph_bs_decode", "disable_cuda_graph_padding",
})
"""SGLang flags outside the explicit parser that the model still uses (no warning)."""


SIM_DEFAULTS: dict[str, Any] = {
    "profile": "default", "startup_seconds": 0.0, "error_rate": 0.0, "malformed_rate": 0.0,
    "lossy_rate": 0.0, "unforced_spec_cost_scale": 1.0, "time_scale": 1.0, "speed_jitter": 0.0,
    "start_seed": 0,
}
"""The `--sim-*` flags' defaults (None for the rest); the flags are engines/sim/options.py's
OPTIONS, their types and help from there."""


class SimArgError(ValueError):
    """A command line the simulator (like SGLang) refuses."""


@dataclass
class SimConfig:
    """Resolved configuration of one simulated server."""

    args: dict[str, Any]
    """ServerArgs-style field -> value, as /server_info reports them (resolved)."""
    profile: Profile
    extra_flags: dict[str, Any] = field(default_factory=dict)
    """Flags that are not explicit options here (field name -> parsed value)."""
    not_modelled: list[str] = field(default_factory=list)
    """Extra flags accepted without effect."""
    notes: list[str] = field(default_factory=list)
    """Lines for the start-up log (caps applied, adaptive decisions)."""
    env: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:  # convenient read access to args
        try:
            return self.__dict__["args"][name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    @property
    def speculative(self) -> bool:
        return self.args["speculative_algorithm"] is not None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engines.sim",
        description="Simulated SGLang server (specgrid-sim). Numbers are a model, not a GPU.",
        allow_abbrev=False,
    )
    a = p.add_argument
    a("--model-path", default="specgrid/sim-model")
    a("--served-model-name", default=None)
    a("--tokenizer-path", default=None)
    a("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--max-running-requests", type=int, default=None)
    a("--speculative-algorithm", default=None)
    a("--speculative-draft-model-path", default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-adaptive", action="store_true")
    a("--speculative-adaptive-config", default=None)
    a("--enable-metrics", action="store_true")
    a("--api-key", default=None)
    a("--decode-log-interval", type=int, default=40)
    for key, option in OPTIONS.items():  # the simulator's own flags: its engine options
        kind = option.types[0] if option.types else float
        a(f"--sim-{key.replace('_', '-')}", type=kind, default=SIM_DEFAULTS.get(key),
          help=option.help)
    return p


def auto_speculative_params(algorithm: str, architectures: Sequence[str]) -> dict[str, int]:
    """SGLang 0.5.23's automatic (steps, topk, draft_tokens) when none of the three is given:
    python/sglang/srt/arg_groups/speculative_hook.py ``_auto_choose_speculative_params``:
    STANDALONE (3, 1, 4); LlamaForCausalLM (5, 4, 8); Grok1 (5, 4, 8); others (3, 1, 4)."""
    arch = architectures[0] if architectures else ""
    if algorithm != "STANDALONE" and arch in ("LlamaForCausalLM", "Grok1ForCausalLM",
                                              "Grok1VForCausalLM"):
        return {"steps": 5, "topk": 4, "draft_tokens": 8}
    return {"steps": 3, "topk": 1, "draft_tokens": 4}


def _parse_value(values: list[str]) -> Any:
    if not values:
        return True
    out: list[Any] = []
    for v in values:
        low = v.lower()
        if low in ("true", "false"):
            out.append(low == "true")
            continue
        for conv in (int, float):
            try:
                out.append(conv(v))
                break
            except ValueError:
                pass
        else:
            out.append(v)
    return out[0] if len(out) == 1 else out


def parse_extra(tokens: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """``--flag value``, ``--flag=value``, ``--flag v1 v2`` and bare ``--switch`` -> field map;
    also returns stray tokens that belong to no flag."""
    flags: dict[str, Any] = {}
    stray: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--") or tok == "--":
            stray.append(tok)
            i += 1
            continue
        name, eq, inline = tok[2:].partition("=")
        values: list[str] = [inline] if eq else []
        i += 1
        if not eq:
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(tokens[i])
                i += 1
        flags[name.replace("-", "_")] = _parse_value(values)
    return flags, stray


def resolve(argv: Sequence[str], env: Mapping[str, str] | None = None) -> SimConfig:
    """Parse ``argv`` and resolve it against the profile; SimArgError on a refused line."""
    env = dict(os.environ if env is None else env)
    ns, rest = build_parser().parse_known_args(list(argv))
    extra, stray = parse_extra(rest)
    try:
        profile = load_profile(ns.sim_profile, ns.sim_hardware, ns.sim_model)
    except ValueError as exc:
        raise SimArgError(str(exc)) from exc
    args: dict[str, Any] = {k: v for k, v in vars(ns).items() if not k.startswith("sim_")}
    args["served_model_name"] = ns.served_model_name or ns.model_path
    args["tokenizer_path"] = ns.tokenizer_path or ns.model_path
    notes: list[str] = [f"ignoring stray argument {tok!r}" for tok in stray]
    not_modelled = sorted(k for k in extra if k not in MODELLED_EXTRA_FLAGS)
    _check_rates(ns)
    adaptive_cfg = _resolve_speculation(ns, profile, args, notes)
    _running_cap(ns, profile, args, notes)
    args["speculative_adaptive_config_resolved"] = adaptive_cfg
    _resolve_memory(ns, extra, profile, args)
    args["sim"] = _sim_settings(ns, extra, profile)
    return SimConfig(args=args, profile=profile, extra_flags=extra, not_modelled=not_modelled,
                     notes=notes, env=env)


def _check_rates(ns: argparse.Namespace) -> None:
    """The fault rates are shares and the time scale is not negative."""
    for rate_name in ("sim_error_rate", "sim_malformed_rate", "sim_lossy_rate"):
        if not 0.0 <= getattr(ns, rate_name) <= 1.0:
            raise SimArgError(f"--{rate_name.replace('_', '-')} must be within [0, 1]")
    if ns.sim_time_scale < 0:
        raise SimArgError("--sim-time-scale must be >= 0")
    if not 0.0 <= ns.sim_speed_jitter < 1.0:
        raise SimArgError("--sim-speed-jitter must be within [0, 1)")
    if not ns.sim_unforced_spec_cost_scale > 0:
        raise SimArgError("--sim-unforced-spec-cost-scale must be > 0")


def _resolve_speculation(ns: argparse.Namespace, profile: Profile, args: dict[str, Any],
                         notes: list[str]) -> dict[str, Any] | None:
    """The speculative algorithm and shape (steps, topk, draft tokens) into `args`, as SGLang
    resolves them (module docstring); the adaptive config when adaptation stays on."""
    algo = ns.speculative_algorithm.upper() if ns.speculative_algorithm else None
    args["speculative_algorithm"] = algo
    steps, topk = ns.speculative_num_steps, ns.speculative_eagle_topk
    ndt = ns.speculative_num_draft_tokens
    adaptive_cfg: dict[str, Any] | None = None
    if algo is None:
        if ns.speculative_adaptive:
            notes.append("speculative_adaptive ignored: no --speculative-algorithm")
        args["speculative_adaptive"] = False
    else:
        adaptive = ns.speculative_adaptive
        if adaptive and (algo not in ADAPTIVE_ALGORITHMS or topk not in (None, 1)):
            reason = (f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
                      if algo not in ADAPTIVE_ALGORITHMS
                      else f"speculative_eagle_topk={topk} (only topk=1 is supported)")
            notes.append(f"speculative_adaptive disabled: {reason}. "
                         "Falling back to static speculative params.")
            adaptive = False
        if adaptive:
            adaptive_cfg, steps = _adaptive_steps(ns.speculative_adaptive_config, steps)
            topk, ndt = 1, steps + 1
        else:
            auto = auto_speculative_params(algo, profile.model_data.get("architectures", []))
            steps, topk, ndt = _static_shape(algo, auto, (steps, topk, ndt), notes)
        args["speculative_adaptive"] = adaptive
        if steps < 0 or (ndt or 0) < 1:
            raise SimArgError("speculative steps must be >= 0 and draft tokens >= 1")
    args["speculative_num_steps"], args["speculative_eagle_topk"] = steps, topk
    args["speculative_num_draft_tokens"] = ndt
    return adaptive_cfg


def _adaptive_steps(path: str | None, steps: int | None) -> tuple[dict[str, Any], int]:
    """The adaptive config and the starting steps: the middle candidate when none is given;
    SGLang refuses steps outside the candidates at start-up."""
    try:
        config = load_adaptive_config(path)
    except (OSError, ValueError) as exc:
        raise SimArgError(f"--speculative-adaptive-config: {exc}") from exc
    union = candidate_steps(config)
    if steps is None:
        steps = union[len(union) // 2]
    if steps not in union:
        raise SimArgError(
            f"--speculative-num-steps={steps} is not in the adaptive config "
            f"candidate_steps {union}. Pass one of those values.")
    return config, steps


def _static_shape(algo: str, auto: Mapping[str, int],
                  given: tuple[int | None, int | None, int | None], notes: list[str]
                  ) -> tuple[int, int, int | None]:
    """(steps, topk, draft tokens) of a static speculative shape from the given ones:
    NGRAM's from its draft tokens, SGLang's automatic ones when none is given, and draft
    tokens = steps + 1 at topk 1."""
    steps, topk, ndt = given
    if algo == "NGRAM":
        ndt = ndt or auto["draft_tokens"]
        steps, topk = ndt - 1, 1
    elif steps is None and topk is None and ndt is None:
        steps, topk, ndt = auto["steps"], auto["topk"], auto["draft_tokens"]
        notes.append(f"speculative params chosen automatically: steps={steps}, "
                     f"topk={topk}, draft_tokens={ndt}")
    steps = auto["steps"] if steps is None else steps
    topk = 1 if topk is None else topk
    if topk == 1:
        if ndt is not None and ndt != steps + 1:
            notes.append(f"speculative_num_draft_tokens adjusted to {steps + 1} "
                         "(speculative_num_steps + 1) because speculative_eagle_topk == 1")
        ndt = steps + 1
    elif ndt is None:
        ndt = min(steps * topk + 1, 64)
    return steps, topk, ndt


def _running_cap(ns: argparse.Namespace, profile: Profile, args: dict[str, Any],
                 notes: list[str]) -> None:
    """The running-request cap when none is given: SGLang's silent cap for the speculative
    algorithms that have one, else the server's default."""
    srv = profile.server
    algo = args["speculative_algorithm"]
    if ns.max_running_requests is None:
        if algo in CAPPED_ALGORITHMS:
            cap = int(srv.get("speculative_silent_cap", 48))
            args["max_running_requests"] = cap
            notes.append(f"max_running_requests is not set: capped at {cap}, as SGLang silently "
                         f"does for {algo} speculative decoding (set it explicitly for fair "
                         "comparisons)")
        else:
            args["max_running_requests"] = int(srv.get("default_max_running_requests", 1024))


def _resolve_memory(ns: argparse.Namespace, extra: Mapping[str, Any], profile: Profile,
                    args: dict[str, Any]) -> None:
    """CUDA graphs, the KV pool, prefill and context limits, and the memory fraction; a server
    whose weights leave no room for a KV cache is refused, as SGLang refuses to start."""
    srv = profile.server
    args["disable_cuda_graph"] = bool(extra.get("disable_cuda_graph", False))
    explicit_bs = extra.get("cuda_graph_max_bs_decode", extra.get("cuda_graph_max_bs"))
    tp = profile.model_spec.node_tp or max(1, ns.tp_size)
    args["cuda_graph_max_bs"] = int(explicit_bs) if explicit_bs is not None else \
        default_decode_max_bs(profile.hardware.memory_gib * 1024, tp,
                              args["max_running_requests"])
    args["max_total_num_tokens"] = (int(extra["max_total_tokens"])
                                    if "max_total_tokens" in extra else None)
    # None: the KV pool that fits --mem-fraction-static, sized by engines/sim/core.py.
    args["max_prefill_tokens"] = int(extra.get("max_prefill_tokens",
                                               srv.get("max_prefill_tokens", 16384)))
    args["context_length"] = int(extra.get("context_length",
                                           profile.model_data.get("context_length", 131072)))
    args["mem_fraction_static"] = mem_fraction(profile, extra.get("mem_fraction_static"))
    # SGLang refuses to start when the weights leave no room for a KV cache; so does the
    # simulator, before it would serve with a pool of 0 tokens (engines/sim/memory.py).
    refused = memory_fit(profile, ns.tp_size, args["mem_fraction_static"]).problem()
    if refused:
        raise SimArgError(refused)
    args["chunked_prefill_size"] = int(extra.get("chunked_prefill_size",
                                                 srv.get("chunked_prefill_size", 8192)))
    args["disable_radix_cache"] = bool(extra.get("disable_radix_cache", False))
    args["disable_cuda_graph_padding"] = bool(extra.get("disable_cuda_graph_padding", False))


def speed_factor(seed: int, start_seed: int, jitter: float) -> float:
    """This start's speed factor: uniform in [1 - jitter, 1 + jitter], drawn from the server's
    seed and the start's seed (the same pair, the same factor); 1 without jitter."""
    if not jitter:
        return 1.0
    return random.Random(seed_for("speed", seed, start_seed)).uniform(1 - jitter, 1 + jitter)


def _sim_settings(ns: argparse.Namespace, extra: Mapping[str, Any], profile: Profile
                  ) -> dict[str, Any]:
    """The simulator's own settings as /server_info reports them (`sim`), with its drafter's
    inputs checked (engines/sim/drafter.py)."""
    given = ns.sim_seed if ns.sim_seed is not None else extra.get("random_seed", 0)
    seed = int(given) if isinstance(given, int | float) else 0
    sim = {
        "profile": profile.name,
        "hardware": profile.hardware_data["name"],
        "model": profile.model_data["name"],
        "startup_seconds": ns.sim_startup_seconds,
        "crash_after_requests": ns.sim_crash_after_requests,
        "hang_after_requests": ns.sim_hang_after_requests,
        "error_rate": ns.sim_error_rate,
        "malformed_rate": ns.sim_malformed_rate,
        "lossy_rate": ns.sim_lossy_rate,
        "unforced_spec_cost_scale": ns.sim_unforced_spec_cost_scale,
        "seed": seed,
        "time_scale": ns.sim_time_scale,
        "speed_jitter": ns.sim_speed_jitter,
        "start_seed": ns.sim_start_seed,
        "speed_factor": speed_factor(seed, ns.sim_start_seed, ns.sim_speed_jitter),
        "drafter_train_data": ns.sim_drafter_train_data,
        "drafter_train_mix": ns.sim_drafter_train_mix,
    }
    try:
        parse_mix(ns.sim_drafter_train_mix)
        if ns.sim_drafter_train_data and not os.path.exists(ns.sim_drafter_train_data):
            raise ValueError(f"--sim-drafter-train-data {ns.sim_drafter_train_data} not found")
    except ValueError as exc:
        raise SimArgError(str(exc)) from exc
    return sim
