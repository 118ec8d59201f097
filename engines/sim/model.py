"""The simulator's performance model: plain functions and frozen data, no sockets, no asyncio.

Everything the simulated server decides about *time* and *acceptance* is here, so it can be
unit-tested and reused offline (engines/sim/calibrate.py runs the same model without a clock).

Rules (all documented, all deterministic):

- Prompt tokens: ``ceil(len(text) / 4)`` characters-per-token (the usual English rule of thumb
  for BPE tokenizers), at least 1. Chat prompts: the message contents joined with newlines, plus
  a template overhead of 4 tokens per message and 3 for the generation prompt (roughly Llama-3's
  header tokens). Completion tokens: one whitespace-separated word per token (engines/sim/text.py),
  so ``len(text.split()) == completion_tokens`` for every response.
- Domain: a keyword classifier over the prompt text alone (first 16,000 characters), one of
  ``coding``, ``agentic``, ``math``, ``encyclopedic``, or ``general`` when nothing matches.
- Acceptance: per-position *conditional* probabilities from the profile (position i is accepted
  only if positions < i were), so with s draft steps the accepted length is 1 (the bonus token
  the verifier always yields) plus the run of accepted drafts, at most s.
- Step time: linear in tokens processed (see ``StepCosts``), times a hardware factor that carries
  the environment's effect on the all-reduce share of a forward pass (see ``hardware_factor``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
"""Prompt tokenizer rule: one token per 4 characters, rounded up."""
CHAT_TOKENS_PER_MESSAGE = 4
"""Chat template overhead per message (role header + end-of-turn, as in Llama-3's template)."""
CHAT_GENERATION_PROMPT_TOKENS = 3
"""Chat template overhead for the assistant header that opens the reply."""
CLASSIFY_CHARS = 16_000
"""Only this prefix of a prompt is scanned by the domain classifier (bounded cost per request)."""

DOMAINS: tuple[str, ...] = ("coding", "agentic", "math", "encyclopedic", "general")


# --------------------------------------------------------------------------- tokenizer rule
def prompt_tokens(text: str) -> int:
    """Prompt token count of ``text``: ceil(len / 4), at least 1."""
    return max(1, -(-len(text) // CHARS_PER_TOKEN))


def message_text(content: Any) -> str:
    """Text of one chat message content: a string, or OpenAI content parts of type text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(str(p) for p in parts)
    return str(content)


def chat_prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text a chat prompt is judged by: message contents joined by newlines."""
    return "\n".join(message_text(m.get("content")) for m in messages)


def chat_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens of a chat request: contents by the 4-char rule plus template overhead."""
    return (
        prompt_tokens(chat_prompt_text(messages))
        + CHAT_TOKENS_PER_MESSAGE * len(messages)
        + CHAT_GENERATION_PROMPT_TOKENS
    )


# --------------------------------------------------------------------------- domain classifier
# Keywords are matched as lower-case substrings; each keyword counts at most 3 times so one
# repeated word cannot decide a long prompt. Agentic wins ties over coding (agent prompts quote
# code and JSON), coding over math, math over encyclopedic.
_KEYWORDS: dict[str, tuple[str, ...]] = {
    "agentic": (
        "tool", "agent", "observation", "action:", "thought:", "json tool call", "tool call",
        "function call", "browser", "click(", "call the", "next action", "plan your steps",
        "numbered plan", "available tools", "tool schema", "arguments", "execute", "terminal",
        "shell command", "workspace", "subtask", "read_file", "run_tests", "step by step",
    ),
    "coding": (
        "python", "javascript", "typescript", "rust", "golang", " java", "c++", "sql", "code",
        "function", "def ", "class ", "return ", "import ", "bug", "compile", "refactor",
        "unit test", "pytest", "algorithm", "implement", "regex", "```", "stack trace",
        "exception", "endpoint", "async", "await", "type hint", "docstring", "query", "api",
        "=>", "();", "#include", "print(", "console.log", "hashmap", "linked list", "o(1)",
        "cache", "struct", "callback", "bash", "script", "compiler", "variable", "database",
    ),
    "math": (
        "solve", "equation", "integral", "derivative", "prove", "theorem", "lemma",
        "probability", "calculate", "compute the", "matrix", "polynomial", "prime number",
        "\\frac", "x^2", "modulo", "geometry", "triangle", "how many ways", "sum of the",
        "real numbers", "integer", "inequality",
    ),
    "encyclopedic": (
        "history", "historical", "century", "emperor", "empire", "dynasty", "king", "queen",
        "president", "revolution", "war ", "capital of", "country", "countries", "population",
        "river", "mountain", "who was", "who painted", "biography", "founded", "ancient",
        "culture", "museum", "species", "planet", "star like", "photosynthesis", "atmosphere",
        "civilization", "famous", "describe the life", "explain the causes", "silk road",
        "geography", "climate", "economy", "painted", "chapel", "continent", "ocean",
    ),
}
_TIE_ORDER = ("agentic", "coding", "math", "encyclopedic")
_WS = re.compile(r"\s+")


def _keyword_regex(keywords: Iterable[str]) -> re.Pattern[str]:
    # A keyword that starts with a letter must start a word ("api" must not match "capital").
    alts = [(r"\b" if k[0].isalnum() else "") + re.escape(k) for k in keywords]
    return re.compile("|".join(sorted(alts, key=len, reverse=True)))


_REGEXES: dict[str, re.Pattern[str]] = {d: _keyword_regex(k) for d, k in _KEYWORDS.items()}


def domain_scores(text: str) -> dict[str, int]:
    """Keyword hit counts per domain for ``text`` (each keyword capped at 3 hits)."""
    low = _WS.sub(" ", text[:CLASSIFY_CHARS].lower())
    scores: dict[str, int] = {}
    for domain, rx in _REGEXES.items():
        counts: dict[str, int] = {}
        for m in rx.finditer(low):
            counts[m.group()] = counts.get(m.group(), 0) + 1
        scores[domain] = sum(min(3, c) for c in counts.values())
    return scores


def classify_domain(text: str) -> str:
    """The prompt's domain from its text alone; ``general`` when no keyword matches."""
    scores = domain_scores(text)
    best = max(scores.values())
    if best == 0:
        return "general"
    # Agentic prompts mention code and JSON; they are agentic once tool vocabulary is a fair
    # share of the hits (at least 2 hits and at least half of the coding score).
    if scores["agentic"] >= 2 and scores["agentic"] * 2 >= scores["coding"]:
        return "agentic"
    for domain in _TIE_ORDER:
        if scores[domain] == best:
            return domain
    return "general"  # pragma: no cover - best > 0 always matches one domain


# --------------------------------------------------------------------------- acceptance
def acceptance_probs(
    table: Mapping[str, Sequence[float]],
    domain: str,
    *,
    accept_scale: float = 1.0,
    topk: int = 1,
    temperature: float = 0.0,
    temperature_penalty: float = 0.0,
    max_positions: int = 16,
) -> tuple[float, ...]:
    """Per-position conditional acceptance probabilities for one request.

    ``table[domain]`` holds the profile's chain (topk=1) probabilities at temperature 0; missing
    positions extend the last value by a 0.95 decay. ``accept_scale`` is the algorithm's factor
    (EAGLE3 = 1.0). topk > 1 (a tree) gives each position more candidates: p -> 1-(1-p)^(1+(k-1)/2),
    a heuristic for "one of k guesses matches". Sampling (temperature > 0) lowers every position
    by ``temperature_penalty * min(temperature, 1)`` relative.
    """
    base = list(table.get(domain) or table["general"])
    while len(base) < max_positions:
        base.append(base[-1] * 0.95)
    factor = accept_scale * (1.0 - temperature_penalty * min(max(temperature, 0.0), 1.0))
    tree_exp = 1.0 + (max(topk, 1) - 1) / 2.0
    out: list[float] = []
    for p in base[:max_positions]:
        q = min(max(p * factor, 0.0), 0.999)
        if tree_exp != 1.0:
            q = 1.0 - (1.0 - q) ** tree_exp
        out.append(q)
    return tuple(out)


def draw_accept_length(random: Callable[[], float], probs: Sequence[float], steps: int) -> int:
    """Accepted tokens in one verify: 1 (bonus) + the run of accepted drafts, at most steps."""
    accepted = 1
    for i in range(steps):
        if random() < probs[i]:
            accepted += 1
        else:
            break
    return accepted


def expected_accept_length(probs: Sequence[float], steps: int) -> float:
    """E[accepted tokens per verify] = 1 + sum_i prod_{j<=i} p_j over the first ``steps``."""
    total, run = 1.0, 1.0
    for p in probs[:steps]:
        run *= p
        total += run
    return total


def simulated_accept_length(random: Callable[[], float], mean: float, max_len: int) -> int:
    """SGLANG_SIMULATE_ACC_LEN: floor or ceil of ``mean`` so the average is ``mean`` (clipped)."""
    mean = min(max(mean, 1.0), float(max_len))
    lo = math.floor(mean)
    return lo + (1 if random() < mean - lo else 0)


def natural_output_tokens(random: Callable[[], float], median: float, sigma: float) -> int:
    """Length at which the model would emit EOS: lognormal(median, sigma), at least 1."""
    u1 = max(random(), 1e-12)
    u2 = random()
    z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
    return max(1, int(median * math.exp(sigma * z)))


# --------------------------------------------------------------------------- step time
@dataclass(frozen=True)
class StepCosts:
    """Step-time constants in milliseconds at the profile's reference hardware and environment.

    A forward pass over ``n`` tokens costs ``decode_base_ms + decode_per_token_ms * n`` (a decode
    step of batch b processes b tokens). Prefill is cheaper per token (compute-bound, large
    GEMMs). A speculative step = draft (steps forwards of the small draft model) + verify (one
    target forward over b * draft_tokens tokens, each ``verify_token_cost_ratio`` times a decode
    token: tree masks, no fused decode kernels) + draft extend (one draft forward) + a fixed
    per-step overhead (CPU-side tree building and bookkeeping, not overlapped).
    """

    decode_base_ms: float
    decode_per_token_ms: float
    prefill_base_ms: float
    prefill_per_token_ms: float
    draft_base_ms: float
    draft_per_seq_ms: float
    verify_token_cost_ratio: float
    spec_overhead_base_ms: float
    spec_overhead_per_seq_ms: float
    draft_prefill_fraction: float = 0.1
    """A speculative server also prefills the draft model: this fraction of the target prefill."""
    zero_step_overhead_fraction: float = 0.25
    """Share of the spec overhead still paid by a steps=0 (no drafting) adaptive step."""
    no_cuda_graph_base_factor: float = 1.6
    """--disable-cuda-graph: kernel launches are no longer replayed; the base cost grows."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> StepCosts:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: float(v) for k, v in data.items() if k in known})


@dataclass(frozen=True)
class PerfModel:
    """Step durations in seconds (before --sim-time-scale) for one server configuration."""

    costs: StepCosts
    hw_factor: float = 1.0
    """Multiplier on GPU forward time: compute share x TP scaling + all-reduce share x env."""
    cuda_graph: bool = True
    draft_cost_scale: float = 1.0
    """The speculative algorithm's draft cost relative to an EAGLE-3 head (NGRAM = 0)."""
    details: Mapping[str, Any] = field(default_factory=dict)

    def _fwd_ms(self, tokens: float) -> float:
        c = self.costs
        base = c.decode_base_ms * (1.0 if self.cuda_graph else c.no_cuda_graph_base_factor)
        return base + c.decode_per_token_ms * tokens

    def prefill_s(self, tokens: int, speculative: bool = False) -> float:
        c = self.costs
        ms = c.prefill_base_ms + c.prefill_per_token_ms * tokens
        if speculative and self.draft_cost_scale > 0:
            ms *= 1.0 + c.draft_prefill_fraction * self.draft_cost_scale
        return ms * self.hw_factor / 1000.0

    def decode_s(self, batch: int) -> float:
        """One plain decode step of ``batch`` sequences."""
        return self._fwd_ms(batch) * self.hw_factor / 1000.0

    def spec_step_s(
        self, batch: int, steps: int, draft_tokens: int, draft_extend: bool = True
    ) -> float:
        """One speculative step: steps > 0 drafts and verifies; steps == 0 is adaptive's
        no-drafting step (a plain decode through the verify path, draft extend unless skipped)."""
        c = self.costs
        draft_fwd = (c.draft_base_ms + c.draft_per_seq_ms * batch) * self.draft_cost_scale
        overhead = c.spec_overhead_base_ms + c.spec_overhead_per_seq_ms * batch
        if steps <= 0:
            gpu = self._fwd_ms(batch) + (draft_fwd if draft_extend else 0.0)
            return (gpu * self.hw_factor + overhead * c.zero_step_overhead_fraction) / 1000.0
        verify = self._fwd_ms(0) + c.decode_per_token_ms * c.verify_token_cost_ratio * (
            batch * draft_tokens
        )
        gpu = verify + draft_fwd * (steps + 1)  # steps draft forwards + one draft extend
        return (gpu * self.hw_factor + overhead) / 1000.0


# --------------------------------------------------------------------------- environment
def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _lookup(table: Mapping[str, float], value: str) -> float | None:
    """Case-insensitive lookup; a comma list (NCCL_ALGO=Ring,Tree) takes the best listed value,
    since NCCL picks the fastest allowed algorithm; '^X' exclusions leave NCCL's default (1.0)."""
    if value.startswith("^"):
        return None
    lowered = {k.lower(): v for k, v in table.items()}
    hits = [lowered[v.strip().lower()] for v in value.split(",") if v.strip().lower() in lowered]
    if hits:
        return min(hits)
    return lowered.get("*")


def hardware_factor(
    hardware: Mapping[str, Any],
    env: Mapping[str, str],
    flags: Mapping[str, Any],
    tp_size: int,
) -> tuple[float, dict[str, Any]]:
    """Multiplier on forward-pass time, and a record of what contributed.

    factor = (1 - f) * compute_scale + f * comm_multiplier * comm_scale, with f the profile's
    all-reduce share of a forward pass at the reference TP. With ``tp_scaling`` false (default
    profile: it models one measured 8-GPU node as a whole) compute_scale = comm_scale = 1 and
    --tp-size is only recorded. comm_multiplier is the product of the profile's per-variable
    and per-flag multipliers (``comm_multipliers.env`` / ``comm_multipliers.flags``).
    """
    f = float(hardware.get("comm_fraction", 0.0))
    ref_tp = int(hardware.get("reference_tp", 1))
    compute_scale = comm_scale = 1.0
    if hardware.get("tp_scaling", False):
        tp = max(1, tp_size)
        compute_scale = ref_tp / tp
        ref_share = (ref_tp - 1) / ref_tp if ref_tp > 1 else 1.0
        comm_scale = ((tp - 1) / tp) / ref_share if tp > 1 else 0.0
    mult = 1.0
    applied: dict[str, float] = {}
    tables = hardware.get("comm_multipliers", {})
    for var, table in tables.get("env", {}).items():
        if var in env and env[var] != "":
            m = _lookup(table, str(env[var]))
            if m is not None:
                mult *= m
                applied[f"env:{var}={env[var]}"] = m
    for name, table in tables.get("flags", {}).items():
        value = flags.get(name)
        if value is None or value is False:
            continue
        m = _lookup(table, "true" if value is True else str(value))
        if m is not None:
            mult *= m
            applied[f"flag:--{name.replace('_', '-')}={value}"] = m
    factor = (1.0 - f) * compute_scale + f * mult * comm_scale
    return factor, {
        "factor": round(factor, 6),
        "comm_fraction": f,
        "comm_multiplier": round(mult, 6),
        "compute_scale": compute_scale,
        "comm_scale": comm_scale,
        "applied": applied,
    }


def iter_env_names(hardware: Mapping[str, Any]) -> Iterable[str]:
    """Environment variables the hardware table models."""
    return hardware.get("comm_multipliers", {}).get("env", {}).keys()
