"""The simulated engine: a resolved ``SimConfig`` turned into a performance model, a scheduler and
a request factory. No HTTP here (engines/sim/server.py), no sockets.

Determinism (``--sim-seed``): a request's text and natural EOS point depend on (seed, prompt,
sampling seed) at temperature 0 or with an explicit sampling ``seed``, and also on the request's
arrival index otherwise; its acceptance draws depend on (seed, arrival index, prompt); fault
draws (error, malformed) on (seed, arrival index). Same seed + same arrival order = same output.

Lossless by construction, and lossy on purpose (``--sim-lossy-rate``): docs/simulator.md.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Sequence
from typing import Any

from engines.sglang.semantics import decode_capture_sizes
from engines.sim.adaptive import AdaptiveController
from engines.sim.cli import SimConfig
from engines.sim.drafter import SimDrafter
from engines.sim.loop import SchedulerLoop
from engines.sim.model import (
    FORCED_RATES_ENV,
    PerfModel,
    acceptance_probs,
    classify_domain,
    iter_env_names,
    natural_output_tokens,
)
from engines.sim.scheduler import BatchCore, SimRequest, SpecParams
from engines.sim.text import find_stop, make_words, seed_for

SPEC_ENV = ("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", "SGLANG_SIMULATE_ACC_LEN",
            "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE", FORCED_RATES_ENV)
NOT_MODELLED_ENV = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "SGLang overwrites it with 8 at start-up, so a grid axis over "
                                   "it has no effect (the simulator records it and does the same)",
    "NCCL_CUMEM_ENABLE": "SGLang sets 0 when unset; no throughput effect modelled",
}


class RequestError(ValueError):
    """A request SGLang would refuse with HTTP 400."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class SimEngine:
    """Everything between the HTTP layer and the scheduler core."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        a, prof = cfg.args, cfg.profile
        self.seed: int = a["sim"]["seed"]
        # This start's speed factor (speed_jitter, cli.py) scales every modelled duration.
        self.time_scale: float = a["sim"]["time_scale"] * a["sim"]["speed_factor"]
        flags = {**cfg.extra_flags}
        self.roofline, self.hw_details = prof.roofline(a["tp_size"], cfg.env, flags)
        algo = a["speculative_algorithm"]
        algo_cfg = prof.algorithm(algo) if algo else {"accept_scale": 1.0, "draft_cost_scale": 1.0}
        self.accept_scale = float(algo_cfg.get("accept_scale", 1.0))
        self.graph_bs = decode_capture_sizes(a["cuda_graph_max_bs"], speculative=algo is not None,
                                             disable_padding=a["disable_cuda_graph_padding"])
        self.model = PerfModel(
            roofline=self.roofline,
            cuda_graph=not a["disable_cuda_graph"],
            graph_max_bs=a["cuda_graph_max_bs"],
            draft_cost_scale=float(algo_cfg.get("draft_cost_scale", 1.0)),
            topk=a["speculative_eagle_topk"] or 1,
        )
        if a["max_total_num_tokens"] is None:
            a["max_total_num_tokens"] = self.roofline.kv_capacity_tokens(a["mem_fraction_static"])
            if a["max_total_num_tokens"] < a["context_length"] // 8:
                cfg.notes.append(f"KV cache holds only {a['max_total_num_tokens']} tokens at "
                                 f"--mem-fraction-static {a['mem_fraction_static']}")
        self.spec: SpecParams | None = None
        adaptive: AdaptiveController | None = None
        self.max_steps = 0
        if algo:
            self.spec = SpecParams(algo, a["speculative_num_steps"], a["speculative_eagle_topk"],
                                   a["speculative_num_draft_tokens"])
            self.max_steps = self.spec.steps
            if a["speculative_adaptive"]:
                # SGLang pads to the speculative capture list (adaptive_spec_params.py
                # set_cuda_graph_bs); None when CUDA graphs are off.
                graphs = None if a["disable_cuda_graph"] else self.graph_bs
                adaptive = AdaptiveController(a["speculative_adaptive_config_resolved"],
                                              self.spec.steps, graphs)
                self.max_steps = max(s for slot in adaptive.slots.values()
                                     for s in slot.candidate_steps)
        self.adaptive = adaptive
        sim_acc = cfg.env.get("SGLANG_SIMULATE_ACC_LEN")
        srv = prof.server
        self.core = BatchCore(
            model=self.model,
            max_running=a["max_running_requests"],
            max_prefill_tokens=a["max_prefill_tokens"],
            chunked_prefill_size=a["chunked_prefill_size"],
            radix_cache=not a["disable_radix_cache"],
            max_total_tokens=a["max_total_num_tokens"],
            spec=self.spec,
            adaptive=adaptive,
            skip_zero_step_extend=_truthy(cfg.env.get("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND")),
            simulate_acc_len=float(sim_acc) if sim_acc and float(sim_acc) > 0 else None,
            simulate_acc_rates=tuple(float(r) for r in forced.split(","))
            if (forced := cfg.env.get(FORCED_RATES_ENV)) else None,
            unforced_spec_cost_scale=a["sim"]["unforced_spec_cost_scale"],
            cold_draft_steps=int(srv.get("cold_draft_steps", 3)),
            cold_draft_factor=float(srv.get("cold_draft_factor", 0.6)),
            time_scale=self.time_scale,
        )
        self.loop: SchedulerLoop | None = None
        self._counter = itertools.count()
        self.fault_rng = random.Random(seed_for(self.seed, "faults"))
        smp = prof.sampling
        self.eos_token_id = int(smp.get("eos_token_id", 2))
        self.natural_median = float(smp.get("natural_output_median_tokens", 220))
        self.natural_sigma = float(smp.get("natural_output_sigma", 0.7))
        self.temperature_penalty = float(smp.get("temperature_accept_penalty", 0.0))
        self.lossy_rate = float(a["sim"].get("lossy_rate") or 0.0)
        # Acceptance follows the prompt's closeness to the drafter's data and, for a trained
        # short-sequence head (the algorithm's `context_decay`), the request's context length
        # (engines/sim/drafter.py).
        context = prof.context_decay if algo_cfg.get("context_decay") else None
        # A twin's profile (docs/twin.md) gives a fitted chain per prompt domain instead.
        self.domain_context = context if prof.acceptance_by_domain else None
        self.drafter = (SimDrafter.from_sim_args(a["sim"], prof.acceptance, context)
                        if algo and not prof.acceptance_by_domain else None)

    def start(self, on_log: Any = None) -> SchedulerLoop:
        self.loop = SchedulerLoop(self.core, self.time_scale, self.cfg.args["decode_log_interval"],
                                  on_log)
        self.loop.start()
        return self.loop

    # ------------------------------------------------------------------ requests
    def new_request(
        self,
        *,
        prompt_text: str,
        prompt_tokens: int,
        max_new_tokens: int,
        ignore_eos: bool = False,
        stop: Sequence[str] = (),
        temperature: float = 1.0,
        sampling_seed: int | None = None,
        rid: str,
        counted: bool = True,
    ) -> SimRequest:
        """Build a request: domain, text, finish point and acceptance are all decided here."""
        ctx = self.cfg.args["context_length"]
        if prompt_tokens >= ctx:
            raise RequestError(f"The input ({prompt_tokens} tokens) is longer than the model's "
                               f"context length ({ctx} tokens).")
        if max_new_tokens < 0:
            raise RequestError("max_new_tokens must be at least 0")
        idx = next(self._counter)
        domain = classify_domain(prompt_text) if prompt_text else "general"
        digest = seed_for(prompt_text)
        if temperature <= 0 or sampling_seed is not None:
            text_rng = random.Random(seed_for(self.seed, digest, sampling_seed))
        else:
            text_rng = random.Random(seed_for(self.seed, digest, "idx", idx))
        natural = natural_output_tokens(text_rng.random, self.natural_median, self.natural_sigma)
        limit = min(max_new_tokens, ctx - prompt_tokens)
        finish: dict[str, Any] = {"type": "length", "length": limit}
        if not ignore_eos and natural < limit:
            limit = natural
            finish = {"type": "stop", "matched": self.eos_token_id}
        words = make_words(text_rng, domain, limit)
        text_chars = None
        match = find_stop(words, stop) if stop else None
        if match is not None:
            limit, text_chars = match.tokens, match.text_chars
            del words[limit:]
            finish = {"type": "stop", "matched": match.matched}
        probs: tuple[float, ...] = ()
        rng = None
        if self.spec is not None:
            # The drafter's chain for this prompt (engines/sim/drafter.py), not a domain table.
            table = ({"general": self.drafter.chain(prompt_text, prompt_tokens)}
                     if self.drafter else self.cfg.profile.acceptance)
            if self.domain_context is not None:  # the domain's chain, decayed by context
                f = self.domain_context.factor(prompt_tokens)
                table = {domain: [p * f for p in table.get(domain) or table["general"]]}
            probs = acceptance_probs(
                table, domain, accept_scale=self.accept_scale,
                topk=self.spec.topk, steps=self.spec.steps, draft_tokens=self.spec.draft_tokens,
                second_guess=self.cfg.profile.tree_second_guess,
                temperature=temperature,
                temperature_penalty=self.temperature_penalty,
                max_positions=max(16, self.max_steps + 1),
            )
            rng = random.Random(seed_for(self.seed, "accept", idx, digest))
        # a deliberately lossy drafter (--sim-lossy-rate): decided per prompt, so every
        # request of a prompt is lossy or none is, whatever the arrival order
        lossy = (self.spec is not None and self.lossy_rate > 0
                 and random.Random(seed_for(self.seed, "lossy", digest)).random()
                 < self.lossy_rate)
        return SimRequest(
            rid=rid, prompt_tokens=prompt_tokens, limit=limit, finish_reason=finish,
            words=words, probs=probs, rng=rng, domain=domain, arrival=time.monotonic(),
            text_chars=text_chars, counted=counted, prompt_text=prompt_text, lossy=lossy,
        )

    def submit(self, req: SimRequest) -> None:
        """Schedule ``req``, after the profile's per-request overhead (modelled time) when it
        has one: the time a request spends outside the engine's steps."""
        assert self.loop is not None, "engine not started"
        delay = self.roofline.hw.efficiency.request_overhead_ms / 1000 * self.loop.time_scale
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.loop.submit, req)
        else:
            self.loop.submit(req)

    def abort(self, req: SimRequest) -> None:
        if self.loop is not None:
            self.loop.abort(req)

    # ------------------------------------------------------------------ reporting
    def step_time_table(self, context: int = 1024) -> dict[str, float]:
        """Modelled step times (ms, before --sim-time-scale) at a few batch sizes, each
        sequence holding ``context`` tokens of KV."""
        out: dict[str, float] = {}
        for b in (1, 8, 32, 64):
            kv = b * context
            if self.spec is None:
                out[f"decode_bs{b}_ms"] = round(self.model.decode_s(b, kv) * 1000, 3)
            else:
                steps = self.adaptive.steps_for_batch(b) if self.adaptive else self.spec.steps
                ndt = steps + 1 if self.adaptive else self.spec.draft_tokens
                out[f"spec_bs{b}_steps{steps}_ms"] = round(
                    self.model.spec_step_s(b, steps, ndt, kv) * 1000, 3)
        return out

    def sim_info(self) -> dict[str, Any]:
        """The ``sim`` section of /server_info."""
        env_names = list(iter_env_names(self.cfg.profile.comm_multipliers)) + list(SPEC_ENV)
        extra_env = ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_CUMEM_ENABLE"]
        return {
            **self.cfg.args["sim"],
            "profile_info": self.cfg.profile.summary(),
            "hardware": self.hw_details,
            "modelled_env": {k: self.cfg.env[k] for k in env_names if k in self.cfg.env},
            "modelled_env_names": env_names,
            "recorded_env": {k: self.cfg.env[k] for k in extra_env if k in self.cfg.env},
            "not_modelled_env": NOT_MODELLED_ENV,
            "not_modelled_flags": self.cfg.not_modelled,
            "step_times": self.step_time_table(),
            "drafter": self.drafter.info() if self.drafter else (
                {"acceptance_by": "domain"} if self.cfg.profile.acceptance_by_domain else None),
            "lag_events": self.core.stats.lag_events,
        }
