"""One training or prompt row as every part of specgrid sees it, and the labels that tie a
training row's `source` to a prompt domain.

A row's identity (`row_key`) is a hash of its rendered prompt text, never of its position, file
name or labels and never Python's salted `hash()`: the same row has the same key in every
process, so seeded sampling, holdout splits and leave-one-out comparisons agree everywhere."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DOMAINS: tuple[str, ...] = ("coding", "agentic", "math", "chat", "encyclopedic")
"""Prompt domains of the shipped prompt sets (workloads/prompts/<domain>.jsonl)."""

SOURCE_DOMAINS: dict[str, str] = {
    "deepseek-kimi": "coding",
    "opencodeinstruct": "coding",
    "magicoder": "coding",
    "glaive": "agentic",
    "sweagent": "agentic",
    "mixturethoughts": "math",
    "openthoughts": "math",
    "ultrachat": "chat",
    "sharegpt": "chat",
}
"""Domain of the data-set families an EAGLE-3 drafter is typically trained on (the labels a
training row's `source` carries). deepseek-kimi rows are distilled coding answers, glaive and
sweagent are tool-calling / SWE-agent transcripts, mixturethoughts and openthoughts are
reasoning traces (mostly math), ultrachat and sharegpt are general chat."""

DEFAULT_DRAFTER_MIX: dict[str, float] = {
    "opencodeinstruct": 0.20,
    "magicoder": 0.15,
    "deepseek-kimi": 0.10,
    "glaive": 0.15,
    "sweagent": 0.15,
    "openthoughts": 0.08,
    "mixturethoughts": 0.07,
    "ultrachat": 0.05,
    "sharegpt": 0.05,
}
"""A coding/agentic drafter like the real case this project was built around (~100k examples,
~60 % code, ~30 % agentic, the rest reasoning and chat): the simulator's default drafter."""


def row_key(text: str) -> str:
    """Stable content key of a prompt text (16 hex digits of blake2b): the same text is the same
    row whatever file or label it comes with (a holdout row also in the training data is found,
    a prompt sent to a server is recognised in the reference)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def unit_hash(*parts: object) -> float:
    """A stable number in [0, 1) from `parts` (seeded orderings and holdout splits)."""
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return int.from_bytes(h.digest(), "little") / 2.0**64


def domain_of(source: str | None, domain: str | None) -> str | None:
    """A row's domain: its own label, else the domain its source family belongs to."""
    if domain:
        return domain
    if source:  # "magicoder" or a prompt set's "magicoder-style"
        return SOURCE_DOMAINS.get(source.lower().removesuffix("-style"))
    return None


@dataclass(frozen=True)
class TextRow:
    """One prompt taken from a file: what a benchmark request sends and where it came from."""

    text: str
    """The prompt: the first user turn, or the conversation up to the last user turn."""
    source: str | None
    """The row's `source` label (data-set family), when the file has one."""
    domain: str | None
    """The row's `domain` label, else the domain of its source (SOURCE_DOMAINS)."""
    file: str
    """File the row was read from."""
    line: int
    """1-based line (JSONL) or row number (Parquet, JSON array) within the file."""
    turns: int = 1
    """Conversation turns up to and including the last user turn (1 = a single prompt)."""
    prompt_id: str | None = None
    """The file's own id for the row (prompt files), if any."""

    @property
    def key(self) -> str:
        return row_key(self.text)
