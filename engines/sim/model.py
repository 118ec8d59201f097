"""The simulator's performance model: plain functions and frozen data, no sockets, no asyncio.

Everything the simulated server decides about *time* and *acceptance* is here, so it can be
unit-tested and reused offline (engines/sim/calibrate.py runs the same model without a clock).

Rules (all documented, all deterministic):

- Token counts and the domain: the constants below state each rule (a prompt token per 4
  characters, the chat template's overhead, one completion token per word, engines/sim/text.py;
  a keyword classifier over the prompt's first 16,000 characters, one of `DOMAINS`).
- Acceptance: per-position *conditional* probabilities from the profile (position i is accepted
  only if positions < i were), so with s draft steps the accepted length is 1 (the bonus token
  the verifier always yields) plus the run of accepted drafts, at most s.
- Step time: the roofline of engines/sim/roofline.py (bytes and FLOPs of each forward pass on
  the hardware profile, all-reduces, overheads); ``nccl_multiplier`` carries the environment's
  effect on the NCCL all-reduces.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engines.sim.roofline import Roofline

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
    steps: int = 0,
    draft_tokens: int = 0,
    second_guess: float = 1.0,
    temperature: float = 0.0,
    temperature_penalty: float = 0.0,
    max_positions: int = 16,
) -> tuple[float, ...]:
    """Per-position conditional acceptance probabilities for one request.

    ``table[domain]`` holds the profile's chain (topk=1) probabilities at temperature 0; missing
    positions extend the last value by a 0.95 decay. ``accept_scale`` is the algorithm's factor
    (EAGLE3 = 1.0). Sampling (temperature > 0) lowers every position by
    ``temperature_penalty * min(temperature, 1)`` relative. topk > 1 (a tree of ``steps``
    levels and ``draft_tokens`` tokens) replaces the first ``steps`` positions by the tree's
    conditional acceptance (``tree_reach``, with the drafter's ``second_guess`` share).
    """
    base = list(table.get(domain) or table["general"])
    while len(base) < max_positions:
        base.append(base[-1] * 0.95)
    factor = accept_scale * (1.0 - temperature_penalty * min(max(temperature, 0.0), 1.0))
    out = [min(max(p * factor, 0.0), 0.999) for p in base[:max_positions]]
    if topk > 1 and steps > 0:
        reach = tree_reach(tuple(out[:steps]), steps, topk, draft_tokens or steps * topk + 1,
                           second_guess)
        prev = 1.0
        for i, r in enumerate(reach):
            out[i] = min(r / prev, 0.999) if prev > 0 else 0.0
            prev = r
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def tree_reach(chain: tuple[float, ...], steps: int, topk: int, draft_tokens: int,
               second_guess: float = 1.0) -> tuple[float, ...]:
    """P(accepted drafts >= d) for d = 1..steps when SGLang's EAGLE worker drafts a tree.

    SGLang's tree (python/sglang/srt/speculative/spec_utils.py ``select_top_k_tokens``,
    eagle_utils.py ``organize_draft_results``): the first draft step proposes the top ``topk``
    tokens; each later step expands each of the ``topk`` best paths by ``topk`` tokens
    (topk**2 candidates) and keeps the ``topk`` best by cumulative draft score; then the
    ``draft_tokens - 1`` best of all ``topk + (steps - 1) topk**2`` candidates are verified.
    The drafter is taken as calibrated: at depth d its first guess is the target's token with
    probability ``p_d`` (the chain acceptance) and, when it is not, each further guess is with
    probability ``second_guess x p_d`` (1: every guess catches the same share of what is left,
    a geometric tail; below 1: the drafter's later guesses are worse than its first, as EAGLE
    drafters' are -- the model profile sets it from a published tree accept length). A
    candidate's score is then the probability that it lies on the target's path, so
    P(accepted >= d) is the sum of the verified candidates' scores at depth d. topk = 1
    reduces to the chain: prod(p_1..p_d).
    """
    beams = [1.0]
    cands: list[tuple[float, int]] = []
    for d in range(steps):
        p = chain[d] if d < len(chain) else chain[-1]
        later = p * second_guess
        ranks = [p] + [(1.0 - p) * (1.0 - later) ** (r - 1) * later for r in range(1, topk)]
        expanded = sorted((b * q for b in beams for q in ranks), reverse=True)
        if d == 0:
            expanded = expanded[:topk]
        cands.extend((s, d) for s in expanded)
        beams = expanded[:topk]
    reach = [0.0] * steps
    for score, depth in heapq.nlargest(max(draft_tokens - 1, 0), cands):
        reach[depth] += score
    return tuple(reach)


def draw_accept_length(random: Callable[[], float], probs: Sequence[float], steps: int,
                       scale: float = 1.0) -> int:
    """Accepted tokens in one verify: 1 (bonus) + the run of accepted drafts, at most steps;
    draft i is accepted with probability ``probs[i] * scale``."""
    accepted = 1
    for i in range(steps):
        if random() < probs[i] * scale:
            accepted += 1
        else:
            break
    return accepted


def simulated_accept_length(random: Callable[[], float], mean: float, max_len: int) -> int:
    """SGLANG_SIMULATE_ACC_LEN: floor or ceil of ``mean`` so the average is ``mean`` (clipped)."""
    mean = min(max(mean, 1.0), float(max_len))
    lo = math.floor(mean)
    return lo + (1 if random() < mean - lo else 0)


FORCED_RATES_ENV = "SPECGRID_SIM_ACC_RATES"
"""The simulator's own forced acceptance (engines/forced.py): per-position unconditional rates,
comma-separated, in place of its drafter; step costs unchanged. A forced mean length takes
SGLang's SGLANG_SIMULATE_ACC_LEN, as on SGLang."""


def forced_accept_length(random: Callable[[], float], rates: Sequence[float], max_len: int
                         ) -> int:
    """Tokens one verify step accepts under forced unconditional rates (non-increasing): one
    uniform draw u, 1 + the positions i with u < r_i, so P(the first i drafts accepted) = r_i."""
    u = random()
    return 1 + sum(1 for r in rates[:max_len - 1] if u < r)


def natural_output_tokens(random: Callable[[], float], median: float, sigma: float) -> int:
    """Length at which the model would emit EOS: lognormal(median, sigma), at least 1."""
    u1 = max(random(), 1e-12)
    u2 = random()
    z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
    return max(1, int(median * math.exp(sigma * z)))


# --------------------------------------------------------------------------- step time
@dataclass(frozen=True)
class PerfModel:
    """Step durations in seconds (before --sim-time-scale) for one server configuration: the
    roofline of engines/sim/roofline.py plus the server's CUDA-graph and speculation settings."""

    roofline: Roofline
    cuda_graph: bool = True
    graph_max_bs: int = 256
    """Largest captured decode batch; larger batches run eager (per-layer launch cost)."""
    draft_cost_scale: float = 1.0
    """The speculative algorithm's draft cost relative to an EAGLE-3 head (NGRAM = 0)."""
    topk: int = 1

    def _graph(self, batch: int) -> bool:
        return self.cuda_graph and batch <= self.graph_max_bs

    def prefill_s(self, tokens: int, kv_tokens: float = 0.0, speculative: bool = False) -> float:
        """One prefill chunk of ``tokens`` new tokens (``kv_tokens``: context incl. the chunk)."""
        draft = speculative and self.draft_cost_scale > 0
        return self.roofline.prefill_s(tokens, max(kv_tokens, tokens), draft=draft)

    def decode_s(self, batch: int, kv_tokens: float = 0.0) -> float:
        """One plain decode step of ``batch`` sequences holding ``kv_tokens`` tokens of KV."""
        return self.roofline.decode_s(batch, kv_tokens, self._graph(batch))

    def spec_step_s(self, batch: int, steps: int, draft_tokens: int, kv_tokens: float = 0.0,
                    draft_extend: bool = True) -> float:
        """One speculative step; steps == 0 is adaptive's no-drafting step (a 1-token verify
        through the speculative path plus the draft extend unless skipped)."""
        return self.roofline.spec_step_s(
            batch, steps, draft_tokens, kv_tokens, topk=self.topk if steps > 0 else 1,
            draft_extend=draft_extend, graph=self._graph(batch),
            draft_scale=self.draft_cost_scale)


# --------------------------------------------------------------------------- environment
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


def nccl_multiplier(
    tables: Mapping[str, Any], env: Mapping[str, str], flags: Mapping[str, Any]
) -> tuple[float, dict[str, float]]:
    """Product of the hardware profile's NCCL multipliers (``comm_multipliers.env`` /
    ``.flags``) that ``env`` and ``flags`` select, and a record of each one applied. They
    scale only all-reduces that go through NCCL (roofline.Roofline.allreduce_s)."""
    mult = 1.0
    applied: dict[str, float] = {}
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
    return mult, applied


def iter_env_names(tables: Mapping[str, Any]) -> Iterable[str]:
    """Environment variables the hardware profile's NCCL table models."""
    return tables.get("env", {}).keys()
