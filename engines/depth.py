"""A speculative depth schedule (`variant.speculative_depth`), engine-neutral: tiers
`(from batch size, depth)`, ascending, the first from 1, depths >= 0 (0 = no drafting);
`depth_schedule` checks one. Each engine turns it into its own form (`Engine.depth_setting`,
a `DepthSetting`): vLLM's `num_speculative_tokens_per_batch_size`, SGLang's (and the
simulator's) adaptive config with one candidate per tier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DepthTiers = tuple[tuple[int, int], ...]
"""A speculative depth schedule: (from running batch size, depth) pairs, ascending, the first
from 1; a tier holds up to the next one's start (the last one: every larger batch)."""


def depth_schedule(value: Any) -> DepthTiers:
    """`value` (`[[1, 5], [9, 3], [33, 1], [65, 0]]`) as DepthTiers; ValueError with one line
    naming what is wrong: not a list of [batch, depth] pairs of ints, a first tier not from 1,
    starts not ascending, a negative depth, or no tier that drafts (that is the baseline)."""
    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value or not all(
            not isinstance(t, str | bytes) and isinstance(t, Sequence) and len(t) == 2
            and whole(t[0]) and whole(t[1]) for t in value):
        raise ValueError("speculative_depth must be a non-empty list of [from batch size, "
                         f"depth] pairs of ints, e.g. [[1, 5], [9, 3], [65, 0]]; got {value!r}")
    tiers = tuple((int(t[0]), int(t[1])) for t in value)
    if tiers[0][0] != 1:
        raise ValueError(f"speculative_depth must start from batch size 1, got {tiers[0][0]} "
                         "(every running batch needs a depth)")
    for (a, _), (b, _) in zip(tiers, tiers[1:], strict=False):
        if b <= a:
            raise ValueError(f"speculative_depth tiers must be ascending by batch size: {b} "
                             f"follows {a}")
    negative = [d for _, d in tiers if d < 0]
    if negative:
        raise ValueError(f"speculative_depth depths must be >= 0 (0 = no drafting), got "
                         f"{negative[0]}")
    if max(d for _, d in tiers) == 0:
        raise ValueError("speculative_depth drafts at no batch size (every depth is 0): that "
                         "is the baseline, not a speculative variant")
    return tiers


@dataclass(frozen=True)
class DepthSetting:
    """A depth schedule in one engine's words: what to paste, and what it does there."""

    engine: str
    flags: tuple[str, ...]
    """The server flags that set it (file names as in `files`)."""
    files: Mapping[str, str] = field(default_factory=dict)
    """File name -> content the flags name (SGLang's adaptive config)."""
    tiers: tuple[tuple[int, int | None, int], ...] = ()
    """The depth each running batch gets as the engine routes it: (first batch, last batch or
    None = and above, depth), which may differ from the schedule's tiers (SGLang pads a batch
    to a captured CUDA-graph size before it picks the tier)."""
