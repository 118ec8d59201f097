"""Continuous batching: the pure, clock-free scheduler core (``BatchCore``).

One scheduler iteration is either a *prefill* or a *decode* step, as in SGLang without mixed
chunks: chunked prefill within min(--chunked-prefill-size, --max-prefill-tokens), decode steps
alternating with a long prompt's chunks, the prefix cache (engines/sim/prefix_cache.py), KV
admission reserving ``NEW_TOKEN_RATIO`` of each request's remaining output, and retraction in
SGLang's ``retract_decode`` order (docs/simulator.md "Step cost").

Speculative bookkeeping (per request, as SGLang 0.5.23's
managers/scheduler_components/batch_result_processor.py ``_resolve_spec_v2_tokens``; reported
in the final meta_info by engines/sim/spec_fields.py): every decode step of a speculative
server is one verify (``spec_verify_ct``), including steps with 0 draft steps (an adaptive
tier's, or a server with zero draft tokens); each adds the drafts it accepted, as the verify
accepted them (before max_new_tokens cuts the output), to ``correct_drafts`` and one count to
``histogram[drafts]``.

The core is deterministic and clock-free: ``plan()`` picks the batch, its duration and its draws,
``commit(step, now)`` applies them; engines/sim/loop.py runs it in real time.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from engines.sim.adaptive import AdaptiveController
from engines.sim.metrics import ServerStats
from engines.sim.model import (
    PerfModel,
    draw_accept_length,
    forced_accept_length,
    simulated_accept_length,
)
from engines.sim.prefix_cache import PrefixCache, block_keys
from engines.sim.text import other_word

NEW_TOKEN_RATIO = 0.7
"""Share of a request's remaining output reserved in KV at admission (SGLang's
init_new_token_ratio)."""


@dataclass(slots=True, eq=False)
class SimRequest:
    """One generation request as the scheduler sees it."""

    rid: str
    prompt_tokens: int
    limit: int
    """Completion tokens this request will produce (max_new_tokens, EOS or stop string)."""
    finish_reason: dict[str, Any]
    """What meta_info.finish_reason says once it is done."""
    words: list[str]
    probs: tuple[float, ...] = ()
    rng: random.Random | None = None
    domain: str = "general"
    arrival: float = 0.0
    text_chars: int | None = None
    """Characters of text returned when a stop string cut the text (None: all words)."""
    prompt_text: str = ""
    """For the prefix cache (block hashes of the prompt)."""
    lossy: bool = False
    """--sim-lossy-rate picked it: its token right after the first accepted draft is replaced
    (once), so its text departs from the greedy text of the prompt."""
    n: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    """histogram[d]: its verify steps that accepted exactly d draft tokens (SGLang's
    spec_correct_drafts_histogram, engines/sim/spec_fields.py)."""
    cold_left: int = 0
    cached_tokens: int = 0
    """Prompt tokens served from the prefix cache at (first) admission."""
    prefilled: int = 0
    """Tokens of prompt (+ output after a retraction) whose KV is computed."""
    num_retractions: int = 0
    scheduled_at: float | None = None
    """When its first prefill step began (SGLang's queue_time ends there)."""
    first_token_at: float | None = None
    finished_at: float | None = None
    done: bool = False
    aborted: bool = False
    counted: bool = True
    """Counted in server statistics (health probes are not)."""
    stream: bool = False
    """Streamed response (the is_streaming label of SGLang's request metrics)."""
    waiter: Any = None
    """Future the HTTP handler waits on; set by the loop when tokens arrive."""

    @property
    def context(self) -> int:
        """Tokens of KV this request holds once prefilled."""
        return self.prompt_tokens + self.n

    def verified(self, drafts: int) -> None:
        """One verify step that accepted ``drafts`` draft tokens (SGLang's
        ``spec_verify_ct += 1`` and managers/schedule_batch.py
        ``update_spec_correct_drafts_histogram``)."""
        self.verify_ct += 1
        self.correct_drafts += drafts
        hist = self.histogram
        if len(hist) <= drafts:
            hist.extend([0] * (drafts + 1 - len(hist)))
        hist[drafts] += 1


@dataclass(slots=True)
class Step:
    kind: str
    """"prefill" or "decode"."""
    reqs: list[SimRequest]
    duration_s: float
    accepts: list[int] | None = None
    draft_steps: int = 0
    tokens: int = 0
    chunks: list[int] | None = None
    """Prefill: new tokens computed for each request of ``reqs``."""
    cached: int = 0
    """Prefill: prompt tokens taken from the prefix cache."""


@dataclass
class SpecParams:
    algorithm: str
    steps: int
    topk: int
    draft_tokens: int


@dataclass
class BatchCore:
    """The scheduler's decisions, without a clock."""

    model: PerfModel
    max_running: int
    max_prefill_tokens: int = 16384
    max_total_tokens: int = 1 << 20
    chunked_prefill_size: int = 8192
    radix_cache: bool = True
    spec: SpecParams | None = None
    adaptive: AdaptiveController | None = None
    skip_zero_step_extend: bool = False
    simulate_acc_len: float | None = None
    simulate_acc_rates: tuple[float, ...] | None = None
    """Forced per-position unconditional rates (engines/sim/model.py FORCED_RATES_ENV)."""
    unforced_spec_cost_scale: float = 1.0
    """Multiplies a drafting step's cost (steps > 0) where the drafter's own acceptance runs,
    neither forced rates nor a forced length: a surface measured on forced cells then
    predicts the drafter's own cells wrong by this factor, on purpose
    (`--sim-unforced-spec-cost-scale`, docs/simulator.md). The zero-step path, which drafts
    nothing, and forced servers pay the modelled cost."""
    cold_draft_steps: int = 3
    cold_draft_factor: float = 0.6
    time_scale: float = 1.0
    """Only for the inter-token histogram: modelled seconds x scale = wall seconds."""
    stats: ServerStats = field(default_factory=ServerStats)
    waiting: deque[SimRequest] = field(default_factory=deque)
    running: list[SimRequest] = field(default_factory=list)
    chunked: SimRequest | None = None
    """The request part way through its prompt (SGLang's chunked_req)."""
    kv_used: int = 0
    cache: PrefixCache = field(init=False)
    _last_chunk: bool = False
    _aborted: int = 0

    def __post_init__(self) -> None:
        self.cache = PrefixCache(self.max_total_tokens if self.radix_cache else 0)

    def submit(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        if not req.done and not req.aborted:
            req.aborted = True
            self._aborted += 1
            if req.counted:
                self.stats.num_aborted_requests_total += 1

    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self.chunked)

    def _purge(self) -> None:
        self.waiting = deque(r for r in self.waiting if not r.aborted)
        if self.chunked is not None and self.chunked.aborted:
            self.kv_used -= self.chunked.prefilled
            self.chunked = None
        keep = []
        for r in self.running:
            if r.aborted:
                self.kv_used -= r.context
            else:
                keep.append(r)
        self.running = keep
        self._aborted = 0

    # ------------------------------------------------------------------ planning
    def plan(self) -> Step | None:
        """The next step, or None when there is nothing to run."""
        if self._aborted:
            self._purge()
        decode_first = self._last_chunk and bool(self.running)
        self._last_chunk = False
        if not decode_first and (self.chunked is not None or self.waiting):
            step = self._plan_prefill()
            if step is not None:
                return step
        if not self.running:
            return None
        return self._plan_decode()

    def _prompt_need(self, r: SimRequest) -> int:
        """Tokens whose KV a (re-)admitted request must compute: its prompt, plus the output
        so far after a retraction."""
        return r.prompt_tokens + (r.n if r.num_retractions else 0)

    def _plan_prefill(self) -> Step | None:
        budget = min(self.chunked_prefill_size or self.max_prefill_tokens,
                     self.max_prefill_tokens)
        reqs: list[SimRequest] = []
        chunks: list[int] = []
        kv_read = 0
        cached_total = 0
        kv = self.kv_used
        if self.chunked is not None:
            r = self.chunked
            take = min(self._prompt_need(r) - r.prefilled, budget)
            reqs.append(r)
            chunks.append(take)
            kv_read += r.prefilled + take
            budget -= take
            kv += take
        while (self.waiting and budget > 0 and self.chunked is None
               and len(self.running) + len(reqs) < self.max_running):
            r = self.waiting[0]
            need = self._prompt_need(r)
            cached = 0
            if self.radix_cache and r.prompt_text and r.prefilled == 0:
                cached = self.cache.match(block_keys(r.prompt_text), r.prompt_tokens)
            reserve = int((r.limit - r.n) * NEW_TOKEN_RATIO)
            if (reqs or self.running) and kv + need + reserve > self.max_total_tokens:
                break
            self.waiting.popleft()
            if r.num_retractions == 0:
                r.cached_tokens = cached
            r.prefilled = cached
            kv += cached
            cached_total += cached
            take = min(need - cached, budget)
            reqs.append(r)
            chunks.append(take)
            kv_read += cached + take
            budget -= take
            kv += take
            if r.prefilled + take < need:
                self.chunked = r  # the rest of its prompt goes in later chunks
        if not reqs:
            return None
        self.kv_used = kv
        tokens = sum(chunks)
        dur = self.model.prefill_s(tokens, kv_read, speculative=self.spec is not None)
        return Step("prefill", reqs, dur, tokens=tokens, chunks=chunks, cached=cached_total)

    def _retract(self, need: int) -> None:
        """Free KV until a decode step needing ``need`` new slots fits (SGLang's
        retract_decode order: fewest output tokens first, then longest prompt); at least one
        request keeps running."""
        order = sorted(self.running, key=lambda r: (r.n, -r.prompt_tokens), reverse=True)
        while len(order) > 1 and self.kv_used + need > self.max_total_tokens:
            r = order.pop()
            self.running.remove(r)
            self.kv_used -= r.context
            need -= self._tokens_per_step()
            r.num_retractions += 1
            r.prefilled = 0
            self.waiting.appendleft(r)
            self.stats.num_retractions_total += 1

    def _tokens_per_step(self) -> int:
        if self.spec is None:
            return 1
        return self.spec.draft_tokens if self.adaptive is None else self.spec.steps + 1

    def _plan_decode(self) -> Step:
        per = self._tokens_per_step()
        if self.kv_used + len(self.running) * per > self.max_total_tokens:
            self._retract(len(self.running) * per)
        reqs = list(self.running)
        b = len(reqs)
        kv_tokens = sum(r.prompt_tokens + r.n for r in reqs)
        if self.spec is None:
            return Step("decode", reqs, self.model.decode_s(b, kv_tokens))
        if self.adaptive is not None:
            steps = self.adaptive.steps_for_batch(b)
            ndt = steps + 1
        else:
            steps, ndt = self.spec.steps, self.spec.draft_tokens
        skip_extend = steps == 0 and self.skip_zero_step_extend
        dur = self.model.spec_step_s(b, steps, ndt, kv_tokens, draft_extend=not skip_extend)
        if steps > 0 and self.simulate_acc_rates is None and self.simulate_acc_len is None:
            dur *= self.unforced_spec_cost_scale
        accepts = [1] * b
        if steps > 0:
            max_len = min(steps + 1, ndt)
            for i, r in enumerate(reqs):
                rnd = r.rng.random if r.rng is not None else random.random
                if self.simulate_acc_rates is not None:
                    accepts[i] = forced_accept_length(rnd, self.simulate_acc_rates, max_len)
                    continue
                if self.simulate_acc_len is not None:
                    accepts[i] = simulated_accept_length(rnd, self.simulate_acc_len, max_len)
                    continue
                scale = self.cold_draft_factor if r.cold_left else 1.0
                accepts[i] = draw_accept_length(rnd, r.probs, max_len - 1, scale)
        return Step("decode", reqs, dur, accepts=accepts, draft_steps=steps)

    # ------------------------------------------------------------------ applying
    def commit(self, step: Step, now: float) -> list[SimRequest]:
        """Apply ``step`` at time ``now``; returns the requests that got tokens."""
        if step.kind == "prefill":
            return self._commit_prefill(step, now)
        return self._commit_decode(step, now)

    def _commit_prefill(self, step: Step, now: float) -> list[SimRequest]:
        st = self.stats
        touched: list[SimRequest] = []
        finished = False
        assert step.chunks is not None
        for r, take in zip(step.reqs, step.chunks, strict=True):
            if r.aborted:
                continue
            if r.scheduled_at is None:
                r.scheduled_at = max(r.arrival, now - step.duration_s * self.time_scale)
                if r.counted:
                    st.queue_time.observe(r.scheduled_at - r.arrival)
            r.prefilled += take
            if r.prefilled < self._prompt_need(r):
                self._last_chunk = True
                continue
            if self.chunked is r:
                self.chunked = None
                self._last_chunk = True
            if r.num_retractions == 0 and self.radix_cache and r.prompt_text:
                self.cache.insert(block_keys(r.prompt_text))
            got = 1 if r.n < r.limit else 0
            r.n += got
            self.kv_used += got
            if r.first_token_at is None:
                r.first_token_at = now
                if r.counted:
                    st.ttft[r.stream].observe(now - r.arrival)
            self.running.append(r)
            touched.append(r)
            if r.n >= r.limit:
                finished = True
                self._finish(r, now)
        if finished:
            self.running = [r for r in self.running if not r.done]
        return touched

    def _commit_decode(self, step: Step, now: float) -> list[SimRequest]:
        st = self.stats
        st.decode_steps += 1
        spec = self.spec is not None
        steps = step.draft_steps
        accepts = step.accepts
        touched: list[SimRequest] = []
        finished = False
        gen = 0
        corrects: list[int] = []
        for i, r in enumerate(step.reqs):
            if r.aborted or r.done or r.prefilled == 0:
                continue  # aborted, or retracted after this step was planned
            a = accepts[i] if accepts is not None else 1
            drafts = a - 1  # as the verify accepted them, before the limit cuts the output
            left = r.limit - r.n
            if a > left:
                a = left
            if r.lossy and a >= 2:  # tokens r.n .. r.n+a-1: the first is an accepted draft
                r.words[r.n + 1] = other_word(r.words[r.n + 1], r.domain)
                r.lossy = False
            r.n += a
            gen += a
            if spec:
                r.verified(drafts)
                corrects.append(drafts)
                if steps > 0:
                    if r.cold_left:
                        r.cold_left -= 1
                elif self.skip_zero_step_extend:
                    r.cold_left = self.cold_draft_steps
            touched.append(r)
            if r.n >= r.limit:
                finished = True
                self._finish(r, now)
        self.kv_used += gen
        if gen:
            st.itl.observe(step.duration_s * self.time_scale * len(touched) / gen, gen)
        if spec and touched:
            st.cum_spec_accept_tokens += gen
            st.cum_spec_verify += len(touched)
            if steps > 0:
                st.cum_spec_correct += gen - len(touched)
                st.cum_spec_proposed += steps * len(touched)
            st.win_spec_tokens += gen
            st.win_spec_verify += len(touched)
            if self.adaptive is not None:
                self.adaptive.on_verify(len(step.reqs), corrects)
        if finished:
            self.running = [r for r in self.running if not r.done]
        return touched

    def _finish(self, r: SimRequest, now: float) -> None:
        r.done = True
        r.finished_at = now
        self.kv_used -= r.context
        if r.counted:  # SGLang counts a request's tokens when it finishes
            st = self.stats  # (metrics_collector.py observe_one_finished_request)
            st.prompt_tokens[r.stream] += r.prompt_tokens
            st.generation_tokens[r.stream] += r.n
            st.num_requests[r.stream] += 1
            st.spec_verify_calls_total += r.verify_ct  # per request, at finish, as SGLang
            st.e2e[r.stream].observe(now - r.arrival)
            if r.n > 1 and r.first_token_at is not None and now > r.first_token_at:
                st.tpot[r.stream].observe((now - r.first_token_at) / (r.n - 1))
