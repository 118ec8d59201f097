"""A radix-style prefix cache over prompt text, as SGLang's RadixCache behaves for shared
prefixes: a new request reuses the KV of the longest prompt prefix already cached (reported as
``cached_tokens``) and prefills only the rest; least-recently-used prefixes are evicted when
the cache outgrows its token budget.

The simulator has no token ids: a prompt's tokens are its text in 4-character pieces
(engines/sim/model.py), so a prefix is matched in blocks of ``BLOCK_TOKENS`` tokens
(``4 * BLOCK_TOKENS`` characters), each identified by a hash chained over every block before it
(a path in the radix tree). SGLang always computes at least the last prompt token, so a hit
covers at most ``prompt_tokens - 1`` tokens. Only prompts are cached (not generated text).
"""

from __future__ import annotations

from collections import OrderedDict

from engines.sim.model import CHARS_PER_TOKEN

BLOCK_TOKENS = 16
"""Granularity of a prefix match, in tokens."""
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


def block_keys(text: str) -> list[int]:
    """Chained hashes of the full ``BLOCK_CHARS`` blocks of ``text`` (key i covers blocks 0..i)."""
    keys: list[int] = []
    h = 0
    for start in range(0, len(text) - BLOCK_CHARS + 1, BLOCK_CHARS):
        h = hash((h, text[start:start + BLOCK_CHARS]))
        keys.append(h)
    return keys


class PrefixCache:
    """LRU set of cached prefix blocks with a token budget."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity_blocks = max(0, capacity_tokens // BLOCK_TOKENS)
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.hit_tokens = 0
        self.lookup_tokens = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, keys: list[int], prompt_tokens: int) -> int:
        """Tokens of the longest cached prefix (at most ``prompt_tokens - 1``); touches it."""
        n = 0
        for k in keys:
            if k not in self._blocks:
                break
            self._blocks.move_to_end(k)
            n += 1
        hit = min(n * BLOCK_TOKENS, max(0, prompt_tokens - 1))
        self.hit_tokens += hit
        self.lookup_tokens += prompt_tokens
        return hit

    def insert(self, keys: list[int]) -> None:
        """Cache every block of a prefilled prompt, evicting the least recently used."""
        if not self.capacity_blocks:
            return
        for k in keys:
            self._blocks[k] = None
            self._blocks.move_to_end(k)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        """/flush_cache."""
        self._blocks.clear()

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.lookup_tokens if self.lookup_tokens else 0.0
