"""Seeded, stratified, bottom-k sampling of benchmark prompts from a drafter's training data, and
the holdout split (docs/workloads.md, "Benchmarking on the drafter's own data"). Ranks are
`unit_hash(seed, row_key)`: the k smallest of independent uniform ranks are a uniform sample
without replacement; `n` is split over the strata by the mix (largest remainder)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from workloads.records import TextRow, unit_hash

UNKNOWN = "unknown"
"""Stratum of a row with no source (or no domain, when stratifying by domain)."""


class SampleError(ValueError):
    """A sample that cannot be drawn (bad mix, nothing left); one-line message."""


def normalize_mix(mix: Mapping[str, float] | None, what: str = "mix") -> dict[str, float] | None:
    """Weights scaled to sum 1 (zero weights dropped); SampleError when they cannot be."""
    if mix is None or len(mix) == 0:
        return None
    weights: dict[str, float] = {}
    for key, value in mix.items():
        try:
            weight = float(value)
        except (TypeError, ValueError):
            raise SampleError(f"{what}: weight of {key!r} is not a number: {value!r}") from None
        if weight < 0 or math.isnan(weight):
            raise SampleError(f"{what}: weight of {key!r} is negative or NaN: {value!r}")
        weights[str(key)] = weight
    total = sum(weights.values())
    if not total > 0:
        raise SampleError(f"{what}: weights {dict(mix)} do not sum to a positive number")
    return {k: v / total for k, v in weights.items() if v > 0}


def in_holdout(row: TextRow, fraction: float) -> bool:
    """Whether a row belongs to the holdout split of size `fraction` (seed-independent)."""
    return unit_hash("holdout", row.key) < fraction


def allocate(n: int, weights: Mapping[str, float]) -> dict[str, int]:
    """`n` split over keys by weight, largest remainder first (ties by key name)."""
    raw = {k: n * w for k, w in weights.items()}
    out = {k: int(math.floor(v)) for k, v in raw.items()}
    left = n - sum(out.values())
    for key in sorted(raw, key=lambda k: (-(raw[k] - out[k]), k))[:left]:
        out[key] += 1
    return out


@dataclass
class Sample:
    """A drawn sample and how it was drawn."""

    rows: list[TextRow]
    by: str
    """`source` or `domain`: what the strata are."""
    counts: dict[str, int]
    """Rows drawn per stratum."""
    excluded_training_rows: int = 0
    """Holdout-file rows skipped because the training data contains them too."""
    notes: list[str] = field(default_factory=list)

    @property
    def mix(self) -> dict[str, float]:
        total = sum(self.counts.values()) or 1
        return {k: v / total for k, v in self.counts.items()}


class _Strata:
    """Per (source, domain) pair: rows seen and the n lowest-ranked rows (a max-heap)."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed
        self.heaps: dict[tuple[str, str], list[tuple[float, int, TextRow]]] = {}
        self.seen: dict[tuple[str, str], int] = {}
        self._tiebreak = 0

    def add(self, row: TextRow) -> None:
        pair = (row.source or UNKNOWN, row.domain or UNKNOWN)
        self.seen[pair] = self.seen.get(pair, 0) + 1
        rank = unit_hash(self.seed, row.key)
        heap = self.heaps.setdefault(pair, [])
        self._tiebreak += 1
        item = (-rank, -self._tiebreak, row)
        if len(heap) < self.n:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)

    def stratum_of(self, pair: tuple[str, str], by: str, keys: Iterable[str] | None) -> str | None:
        source, domain = pair
        label = source if by == "source" else domain
        if keys is None:
            return label
        return label if label in keys else None


def stratified_sample(rows: Iterable[TextRow], n: int, *, seed: int = 0,
                      mix: Mapping[str, float] | None = None,
                      holdout_fraction: float | None = None,
                      exclude_keys: frozenset[str] = frozenset()) -> Sample:
    """Draw `n` rows stratified by source (or domain) following `mix` (or the data's own mix).
    Rows whose key is in `exclude_keys` are never drawn; with `holdout_fraction` only rows of
    the holdout split are eligible. Raises SampleError when the mix names a stratum the data
    does not have or nothing is eligible."""
    if n < 1:
        raise SampleError(f"sample size must be at least 1, got {n}")
    weights = normalize_mix(mix)
    strata = _Strata(n, seed)
    excluded = 0
    for row in rows:
        if holdout_fraction is not None and not in_holdout(row, holdout_fraction):
            continue
        if exclude_keys and row.key in exclude_keys:
            excluded += 1
            continue
        strata.add(row)
    if not strata.seen:
        raise SampleError("no eligible rows to sample from (empty after filtering"
                          + (f" to the holdout split {holdout_fraction}" if holdout_fraction
                             is not None else "") + ")")
    sources = {s for s, _ in strata.seen if s != UNKNOWN}
    if weights is not None:
        by = "source" if set(weights) <= sources else "domain"
    else:
        by = "source" if sources else "domain"
    keys = set(weights) if weights is not None else None
    pools: dict[str, list[tuple[float, int, TextRow]]] = {}
    available: dict[str, int] = {}
    for pair, heap in strata.heaps.items():
        label = strata.stratum_of(pair, by, keys)
        if label is None:
            continue
        pools.setdefault(label, []).extend(heap)
        available[label] = available.get(label, 0) + strata.seen[pair]
    if weights is None:
        total = sum(available.values())
        weights = {k: v / total for k, v in available.items()}
    missing = sorted(k for k in weights if k not in pools)
    if missing:
        have = sorted({strata.stratum_of(p, by, None) or UNKNOWN for p in strata.seen})
        raise SampleError(f"the mix names {', '.join(missing)} but the data has no rows with "
                          f"that {by} (has: {', '.join(have)})")
    counts = allocate(n, weights)
    notes: list[str] = []
    chosen: list[tuple[float, int, TextRow]] = []
    for label, want in counts.items():
        best = sorted(pools[label], reverse=True)[:want]  # highest -rank = lowest rank first
        if len(best) < want:
            notes.append(f"{by} {label}: {len(best)} rows available, {want} asked")
            counts[label] = len(best)
        chosen.extend(best)
    chosen.sort(reverse=True)
    return Sample(rows=[row for _, _, row in chosen], by=by, counts=counts,
                  excluded_training_rows=excluded, notes=notes)
