"""The twin's forward model: a closed-loop cell's steady state from the simulator's own step
costs (engines/sim/model.py ``PerfModel`` on the roofline of engines/sim/roofline.py) and its
drafter's acceptance (``acceptance_probs``, ``tree_reach``), in closed form: no clock, no
requests, microseconds per cell, so a fit can evaluate it thousands of times (and the plan
sizes a simulator cell with it, engines/sim/estimate.py).

A closed loop of C streams whose requests all ask for the same O output tokens runs in
*waves*: the running batch B = min(C, running-batch cap, what the KV pool holds) is admitted
together, prefilled (in chunks of the prefill budget, one decode step between two chunks),
decoded together and finishes together; the discrete simulator does exactly that for a
baseline. One wave:

    T = prefill(B x P tokens, in chunks) + n x mean step(B)
    n = O - 1 decode steps (baseline) or (O - 1) / E verify steps (speculative, E tokens per
        verify: 1 + the expected run of accepted drafts, a mixture over the cell's domains)
    mean step = Simpson's rule over the wave: the KV read grows from B x P to B x (P + O)

A speculative batch drifts apart: requests need different numbers of verify steps, so the k-th
wave's arrivals spread over ~4 sqrt(k) sigma decode steps (sigma: the spread of one request's
step count, by renewal theory), and each decode step is then followed by the prefill of the
group that finished in it (a smaller prefill, paid more often). Over the cell's waves
(requests per stream x C / B):

    output tok/s = waves x B x O / sum of the waves' times
    TPOT p50     = the median wave's decode time (with the other groups' prefills) / (O - 1)
    TTFT p50     = the median wave's wait for its prefill (its chunk; or half a step plus its
                   group's prefill), plus, when C > B streams share B slots, the queue: a
                   whole wave x floor(C / B - 1/2) in step, (C / B - 1) once drifted apart

docs/twin.md states what this leaves out (client and HTTP time, staggered arrivals, the
scheduler's retractions) and how far it is from the discrete simulator.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from engines.forced import forced_acceptance
from engines.sglang.semantics import default_decode_max_bs
from engines.sim.drafter import ContextDecay
from engines.sim.model import DOMAINS, PerfModel, acceptance_probs
from engines.sim.profile import Profile
from engines.sim.roofline import Efficiency, Roofline

DOMAIN_OF_LABEL = {"chat": "general"}
"""Workload domain labels (workloads/prompts/*.jsonl) -> the simulator's domains
(engines/sim/model.py DOMAINS); every other label maps to itself if the simulator has it,
else to ``general``."""


def sim_domain(label: str | None) -> str:
    """The simulator's acceptance domain of a workload's domain label."""
    name = DOMAIN_OF_LABEL.get(str(label), str(label))
    return name if name in DOMAINS else "general"


def sim_shares(domains: Mapping[str, float] | None) -> tuple[tuple[str, float], ...]:
    """(simulator domain, share) of a workload's domain labels and their shares, sorted."""
    shares: dict[str, float] = {}
    for label, share in (domains or {"general": 1.0}).items():
        shares[sim_domain(label)] = shares.get(sim_domain(label), 0.0) + float(share)
    return tuple(sorted(shares.items()))


@dataclass(frozen=True)
class Scenario:
    """One closed-loop cell as the model sees it."""

    concurrency: int
    prompt_tokens: float
    """Mean prompt tokens per request."""
    output_tokens: float
    """Mean output tokens per request."""
    spec: tuple[int, int, int] | None = None
    """(num_steps, eagle_topk, num_draft_tokens); None: no speculation."""
    max_running: int | None = None
    """The running-batch cap the server reported (None: the setup's default for the variant)."""
    kv_pool: int | None = None
    """KV-cache tokens the server reported (None: what the profile's memory holds)."""
    domains: tuple[tuple[str, float], ...] = (("general", 1.0),)
    """(simulator domain, share of the cell's requests)."""
    temperature: float = 0.0
    requests_per_stream: float = 4.0
    """Measured requests per stream (the cell's requests / its concurrency): how many waves
    the cell's figures are over."""
    varied_output: bool = False
    """Output lengths differ between requests (no ignore_eos): waves drift apart."""
    known_reach: tuple[float, ...] | None = None
    """Acceptance known for this cell, in place of the drafter's whatever the domain: the
    unconditional rate of each draft position (a forced acceptance, engines/forced.py
    `per_position`, or the engine's own counts, MeasuredCell.known_acceptance); None: the
    setup's drafter chain per domain."""
    off_above: int | None = None
    """Speculation off above this running batch (the variant's
    speculative_disable_above_batch): a verify step of no drafts there."""


def shape(variant: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(num_steps, eagle_topk, num_draft_tokens) of a variant's args (the variant vocabulary
    every engine reads, docs/engines.md); None for a variant that does not speculate."""
    args = variant.get("args") or {}
    if not args.get("speculative_algorithm"):
        return None
    steps = int(args.get("speculative_num_steps") or 3)
    topk = int(args.get("speculative_eagle_topk") or 1)
    draft = args.get("speculative_num_draft_tokens")
    return steps, topk, (steps + 1 if topk == 1 or draft is None else int(draft))


def cell_scenario(config: Mapping[str, Any], concurrency: int, prompt_tokens: float,
                  domains: Mapping[str, float] | None, requests_per_stream: float) -> Scenario:
    """A planned cell's resolved config (``variant``, ``workload``) as the model sees it: its
    shape, running-batch cap, threshold, sampling, and a forced acceptance as its
    per-position rates (engines/forced.py)."""
    workload, variant = config["workload"], config["variant"]
    args = variant.get("args") or {}
    cap, off = args.get("max_running_requests"), variant.get("speculative_disable_above_batch")
    forced = forced_acceptance(variant.get("forced_acceptance"), args)
    return Scenario(
        concurrency=concurrency, prompt_tokens=float(prompt_tokens),
        output_tokens=float(workload["max_new_tokens"]), spec=shape(variant),
        max_running=int(cap) if cap else None, domains=sim_shares(domains),
        temperature=float(workload.get("temperature") or 0.0),
        requests_per_stream=max(1.0, requests_per_stream),
        varied_output=not workload.get("ignore_eos", True),
        known_reach=forced.per_position() if forced is not None else None,
        off_above=int(off) if off is not None else None)


@dataclass(frozen=True)
class Prediction:
    output_tok_s: float
    ttft_p50_s: float
    tpot_p50_s: float
    accept_length: float | None
    """Decode tokens per verify step (None without speculation)."""
    acceptance_per_position: tuple[float, ...] | None
    """Share of verify steps whose i-th draft was accepted (None without speculation)."""
    batch: float
    """The running batch the wave holds."""


@dataclass(frozen=True)
class Setup:
    """Everything of a profile the forward model reads, for one tensor-parallel size."""

    roofline: Roofline
    acceptance: Mapping[str, tuple[float, ...]]
    second_guess: float = 1.0
    accept_scale: float = 1.0
    """The speculative algorithm's acceptance factor (EAGLE3: 1)."""
    temperature_penalty: float = 0.0
    context: ContextDecay | None = None
    default_cap: int = 1024
    """Running-batch cap without speculation when the server reports none."""
    speculative_cap: int = 48
    """Running-batch cap with speculation when the server reports none (SGLang's silent cap)."""
    mem_fraction_static: float = 0.88
    chunk_tokens: int = 8192
    """Prefill budget per step: min(chunked_prefill_size, max_prefill_tokens)."""

    @classmethod
    def from_profile(cls, profile: Profile, tp_size: int = 1,
                     env: Mapping[str, str] | None = None,
                     flags: Mapping[str, Any] | None = None) -> Setup:
        """For a server of ``tp_size`` with its environment and flags (the roofline's
        communication multipliers)."""
        roofline, _ = profile.roofline(tp_size, dict(env or {}), dict(flags or {}))
        srv, algo = profile.server, profile.algorithm("EAGLE3")
        table = {k: tuple(float(p) for p in v) for k, v in profile.acceptance.items()}
        return cls(
            roofline=roofline, acceptance=table, second_guess=profile.tree_second_guess,
            accept_scale=float(algo.get("accept_scale", 1.0)),
            temperature_penalty=float(profile.sampling.get("temperature_accept_penalty", 0.0)),
            context=profile.context_decay if algo.get("context_decay") else None,
            default_cap=int(srv.get("default_max_running_requests", 1024)),
            speculative_cap=int(srv.get("speculative_silent_cap", 48)),
            mem_fraction_static=float(srv.get("mem_fraction_static", 0.88)),
            chunk_tokens=min(int(srv.get("chunked_prefill_size", 8192)),
                             int(srv.get("max_prefill_tokens", 16384))))

    def with_efficiency(self, **factors: float) -> Setup:
        return replace(self, roofline=self.roofline.with_efficiency(**factors))

    @property
    def efficiency(self) -> Efficiency:
        return self.roofline.hw.efficiency

    def chain(self, domain: str, spec: tuple[int, int, int], prompt_tokens: float,
              temperature: float) -> tuple[float, ...]:
        """Per-position conditional acceptance of one request (as the simulator's
        ``new_request`` builds it for a twin's per-domain drafter)."""
        base = self.acceptance.get(domain) or self.acceptance["general"]
        factor = self.context.factor(int(prompt_tokens)) if self.context else 1.0
        return _chain(tuple(base), factor, spec, self.accept_scale, self.second_guess,
                      temperature, self.temperature_penalty)


@functools.lru_cache(maxsize=4096)
def _chain(base: tuple[float, ...], factor: float, spec: tuple[int, int, int],
           accept_scale: float, second_guess: float, temperature: float,
           penalty: float) -> tuple[float, ...]:
    steps, topk, draft = spec
    return acceptance_probs({"general": [p * factor for p in base]}, "general",
                            accept_scale=accept_scale, topk=topk, steps=steps,
                            draft_tokens=draft, second_guess=second_guess,
                            temperature=temperature, temperature_penalty=penalty,
                            max_positions=max(16, steps + 1))


def _positions(spec: tuple[int, int, int]) -> int:
    """Draft positions a verify can accept (the scheduler's ``min(steps + 1, ndt) - 1``)."""
    steps, _, draft = spec
    return max(0, min(steps + 1, draft) - 1)


def acceptance(setup: Setup, sc: Scenario) -> tuple[float, float, tuple[float, ...]]:
    """(E = decode tokens per verify step, its variance per step, per-position acceptance
    shares) of a speculative cell: requests of each domain take (O - 1) / E_d verify steps, so
    the cell's E is the request-weighted harmonic mean and each position's share is weighted
    by steps. Known acceptance: every domain reaches position i with the known rate r_i."""
    assert sc.spec is not None
    m = _positions(sc.spec)
    steps_total, second, weighted = 0.0, 0.0, [0.0] * m
    for domain, share in sc.domains:
        if sc.known_reach is not None:
            reach = list((sc.known_reach + (0.0,) * m)[:m])
        else:
            probs = setup.chain(domain, sc.spec, sc.prompt_tokens, sc.temperature)
            reach = list(itertools.accumulate(probs[:m], operator.mul))
        e = 1.0 + sum(reach)
        # E[A^2] for A = 1 + accepted run: sum over a of (2a - 1) P(A >= a)
        e2 = 1.0 + sum((2 * (i + 2) - 1) * r for i, r in enumerate(reach))
        w = share / e
        steps_total += w
        second += w * e2
        for i, r in enumerate(reach):
            weighted[i] += w * r
    total = sum(s for _, s in sc.domains)
    mean = total / steps_total
    return mean, max(0.0, second / steps_total - mean**2), tuple(v / steps_total
                                                                 for v in weighted)


def running_batch(setup: Setup, sc: Scenario) -> float:
    """The wave's batch: the streams, capped by the running-batch cap and the KV pool
    (prompt + output of every running request must fit)."""
    cap = sc.max_running or (setup.speculative_cap if sc.spec else setup.default_cap)
    pool = sc.kv_pool or setup.roofline.kv_capacity_tokens(setup.mem_fraction_static)
    fits = max(1, math.floor(pool / max(1.0, sc.prompt_tokens + sc.output_tokens)))
    return float(max(1, min(sc.concurrency, cap, fits)))


def _prefill_s(model: PerfModel, tokens: float, budget: int, speculative: bool) -> float:
    """Prefill of ``tokens`` prompt tokens in chunks of at most ``budget``."""
    chunks = max(1, math.ceil(tokens / budget))
    return chunks * model.prefill_s(int(math.ceil(tokens / chunks)), tokens / chunks,
                                    speculative=speculative)


Stepper = tuple[PerfModel, float, float, tuple[float, ...] | None, Callable[[float], float]]


def _stepper(setup: Setup, sc: Scenario, b: float) -> Stepper:
    """(the batch's performance model, E, its variance, per-position shares, the step's
    seconds at a KV read) of the wave's batch ``b``: a decode step, or a verify step of the
    cell's drafts (of none above its ``off_above``)."""
    cap = sc.max_running or (setup.speculative_cap if sc.spec else setup.default_cap)
    graph_bs = default_decode_max_bs(setup.roofline.hw.memory_gib * 1024, setup.roofline.tp,
                                     cap)
    model = PerfModel(setup.roofline, graph_max_bs=graph_bs,
                      topk=sc.spec[1] if sc.spec else 1)
    bi = int(b)
    if sc.spec is None:
        return model, 1.0, 0.0, None, lambda kv: model.decode_s(bi, kv)
    steps, _, draft = sc.spec
    if sc.off_above is not None and bi > sc.off_above:
        return (model, 1.0, 0.0, (0.0,) * _positions(sc.spec),
                lambda kv: model.spec_step_s(bi, 0, draft, kv))
    e, var, shares = acceptance(setup, sc)
    return model, e, var, shares, lambda kv: model.spec_step_s(bi, steps, draft, kv)


def predict(setup: Setup, sc: Scenario) -> Prediction:
    """The cell's steady-state figures (module docstring)."""
    b = running_batch(setup, sc)
    model, e, var, shares, step = _stepper(setup, sc, b)
    p, o = sc.prompt_tokens, max(sc.output_tokens, 2.0)
    spec = sc.spec is not None
    first = step(b * p)
    mean_step = (first + 4 * step(b * (p + o / 2)) + step(b * (p + o))) / 6
    n = (o - 1) / e
    budget = setup.chunk_tokens
    chunks = max(1, math.ceil(b * p / budget))
    # The first wave: every stream's first request arrives at once, prefilled in chunks with
    # one decode step of the requests already prefilled between two chunks.
    chunk = _prefill_s(model, b * p / chunks, budget, spec)
    median_chunk = (chunks + 1) / 2
    sync = (chunks * chunk + (chunks - 1) * first + n * mean_step,
            median_chunk * chunk + (median_chunk - 1) * first,
            n * mean_step / (o - 1))
    # Later waves drift apart when requests need different numbers of steps (acceptance
    # draws, output lengths): the k-th wave's arrivals spread over ~4 sigma_k decode steps,
    # sigma_k = sqrt(k) x the spread of one request's steps (renewal theory: steps to make
    # O - 1 tokens at E per step with variance V have variance (O - 1) V / E^3).
    sigma = math.sqrt((o - 1) * var / e**3) if sc.spec else (
        0.25 * n if sc.varied_output else 0.0)
    n_waves = max(1, round(sc.requests_per_stream * sc.concurrency / b))
    waves = [(*sync, True)]  # (wave time, TTFT p50, TPOT p50, arrivals still together)
    prefills: dict[float, float] = {}
    for k in range(1, n_waves):
        spread = min(n, b, max(1.0, 4 * math.sqrt(k) * sigma))
        if chunks > 1 and spread < chunks:
            # the groups the chunks formed stay apart: each request decodes through the
            # other groups' prefill chunks
            waves.append((sync[0], sync[1], (n * mean_step + (chunks - 1) * chunk) / (o - 1),
                          True))
        elif spread <= 1.0:
            waves.append((*sync, True))
        else:
            group = b / spread
            if group not in prefills:
                prefills[group] = _prefill_s(model, group * p, budget, spec)
            pre = prefills[group]
            waves.append((n * mean_step + spread * pre,
                          (1 - group / b) * mean_step / 2 + pre,
                          (n * mean_step + (spread - 1) * pre) / (o - 1), False))
    # Each request's time outside the engine's steps (HTTP, tokenization, the client's
    # turn-around) comes before it is scheduled: once per wave, and in its TTFT.
    away = setup.efficiency.request_overhead_ms / 1000
    waves = [(wave + away, ttft + away, tpot, together) for wave, ttft, tpot, together in waves]
    queued = sc.concurrency / b  # streams per slot: beyond 1 they queue for one, FIFO
    ttfts = [ttft + (max(0, math.floor(queued - 0.5)) if together else max(0.0, queued - 1))
             * wave for wave, ttft, _, together in waves]
    return Prediction(
        output_tok_s=n_waves * b * sc.output_tokens / sum(w[0] for w in waves),
        ttft_p50_s=statistics.median(ttfts),
        tpot_p50_s=statistics.median(w[2] for w in waves),
        accept_length=e if sc.spec else None, acceptance_per_position=shares, batch=b)
