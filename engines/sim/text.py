"""Deterministic pseudo-text: one token = one word, written as " word" (leading space).

So a response's ``text.split()`` has exactly ``completion_tokens`` items (before a stop-string
cut), and every word is plain lower-case ASCII: the text can be put inside JSON strings without
escaping, which keeps the streaming hot path free of ``json.dumps`` over cumulative text.

Words come from a small per-domain vocabulary (code-ish words for coding prompts, prose words
for encyclopedic ones) so a human glancing at a response sees that the domain was recognised.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

_COMMON = (
    "the of and to in is that for it as with on this be by are from at or an which can "
    "will one all their has more also when each there other into some these two then first "
    "used such only most over than about between after many both same where while through"
).split()
_BY_DOMAIN: dict[str, list[str]] = {
    "coding": (
        "def return import class self value list dict key index result error check test "
        "function variable loop append none true false type string int parse node cache "
        "buffer request response handler async await yield module config path file line"
    ).split(),
    "agentic": (
        "tool call arguments plan step observation action result query search read file "
        "run tests next inspect verify output json name status task goal user done retry"
    ).split(),
    "math": (
        "let equation value sum product root prime integer proof therefore hence since "
        "factor term square number solution case lemma bound limit ratio zero one two"
    ).split(),
    "encyclopedic": (
        "history century empire city river region war king people culture trade period "
        "early later known founded ancient modern state north south east west capital "
        "population dynasty power famous important century"
    ).split(),
}
_BY_DOMAIN["general"] = _COMMON


def vocabulary(domain: str) -> tuple[str, ...]:
    """The token strings (" word") used for responses in ``domain``."""
    words = _BY_DOMAIN.get(domain, _COMMON) + _COMMON
    return tuple(" " + w for w in words)


_VOCABS: dict[str, tuple[str, ...]] = {d: vocabulary(d) for d in _BY_DOMAIN}


def seed_for(*parts: object) -> int:
    """A stable 64-bit seed from ``parts`` (Python's hash() is salted per process)."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(str(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return int.from_bytes(h.digest(), "little")


def make_words(rng: random.Random, domain: str, count: int) -> list[str]:
    """``count`` token strings for a response (deterministic for a seeded ``rng``)."""
    if count <= 0:
        return []
    return rng.choices(_VOCABS.get(domain, _VOCABS["general"]), k=count)


def other_word(word: str, domain: str) -> str:
    """A token string of ``domain``'s vocabulary other than ``word`` (the next one that
    differs): what a lossy drafter puts in place of the target's token."""
    vocab = _VOCABS.get(domain, _VOCABS["general"])
    start = vocab.index(word) + 1 if word in vocab else 0
    for i in range(len(vocab)):
        candidate = vocab[(start + i) % len(vocab)]
        if candidate != word:
            return candidate
    return word + "x"  # unreachable: every vocabulary has several words


@functools.lru_cache(maxsize=1 << 16)
def token_id(word: str) -> int:
    """A stable fake token id for a token string (for ``output_ids``)."""
    return 1000 + seed_for(word) % 120_000


@dataclass(frozen=True)
class StopMatch:
    """Where a stop string ends a response."""

    tokens: int
    """Completion tokens generated when the stop string completed (the matching token counts)."""
    text_chars: int
    """Characters of text returned: the text before the stop string (SGLang drops the stop)."""
    matched: str


def find_stop(words: Sequence[str], stops: Sequence[str]) -> StopMatch | None:
    """The first stop string that completes within ``words``, scanning token by token."""
    stops = [s for s in stops if s]
    if not stops:
        return None
    longest = max(len(s) for s in stops)
    text = ""
    for i, w in enumerate(words):
        start = max(0, len(text) - longest + 1)
        text += w
        best: tuple[int, str] | None = None
        for s in stops:
            pos = text.find(s, start)
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, s)
        if best is not None:
            return StopMatch(tokens=i + 1, text_chars=best[0], matched=best[1])
    return None
