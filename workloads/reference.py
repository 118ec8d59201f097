"""The reference a drafter is compared with: its training rows (bottom-k subsampled above `limit`),
or shipped rows standing for its training mix (docs/workloads.md, "Describing the drafter")."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from workloads import PROMPTS_DIR, TRAIN_SAMPLES_DIR
from workloads.loaders import LoadStats, TrainingDataError, iter_rows
from workloads.records import DOMAINS, SOURCE_DOMAINS, TextRow, unit_hash
from workloads.sampler import SampleError, normalize_mix, stratified_sample

DEFAULT_LIMIT = 20_000
"""Reference rows kept from training data (a larger file is subsampled deterministically; see
workloads/alignment.py MAX_REFERENCE_ROWS)."""
MIX_ROWS = 4000
"""Rows drawn to stand for a training mix."""


@dataclass
class Reference:
    """Reference rows and what they are."""

    rows: list[TextRow]
    description: str
    stats: LoadStats


def bottom_k(rows: Iterable[TextRow], k: int, salt: str = "reference") -> list[TextRow]:
    """The k rows with the lowest `unit_hash(salt, key)` (streaming, memory O(k)), in rank order."""
    heap: list[tuple[float, int, TextRow]] = []
    for n, row in enumerate(rows):
        item = (-unit_hash(salt, row.key), -n, row)
        if len(heap) < k:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    return [row for _, _, row in sorted(heap, reverse=True)]


def _domain_of_key(key: str) -> str:
    low = key.lower()
    if low in DOMAINS:
        return low
    if low in SOURCE_DOMAINS:
        return SOURCE_DOMAINS[low]
    raise SampleError(f"drafter mix key {key!r} is neither a domain ({', '.join(DOMAINS)}) nor "
                      f"a known source ({', '.join(sorted(SOURCE_DOMAINS))})")


def mix_reference(mix: Mapping[str, float], rows_wanted: int = MIX_ROWS,
                  seed: int = 0) -> Reference:
    """Rows standing for a training mix (see the module docstring)."""
    weights = normalize_mix(mix, "drafter train_mix")
    assert weights is not None
    by_domain: dict[str, float] = {}
    for key, weight in weights.items():
        domain = _domain_of_key(key)
        by_domain[domain] = by_domain.get(domain, 0.0) + weight
    stats = LoadStats()
    shipped = iter_rows(TRAIN_SAMPLES_DIR, stats) if TRAIN_SAMPLES_DIR.is_dir() else ()
    pool = [r for r in shipped if r.domain in by_domain]
    for domain in by_domain:
        path = PROMPTS_DIR / f"{domain}.jsonl"
        if path.is_file():
            pool.extend(r if r.domain else replace(r, domain=domain)
                        for r in iter_rows(path, stats))
    have = {r.domain for r in pool}
    absent = sorted(d for d in by_domain if d not in have)
    for domain in absent:
        del by_domain[domain]
    if not by_domain:
        raise SampleError(f"drafter train_mix {dict(mix)}: no shipped rows stand for any of its "
                          "domains")
    rows = pool
    if len(pool) > rows_wanted:
        rows = stratified_sample(pool, rows_wanted, seed=seed, mix=by_domain).rows
    label = ", ".join(f"{k} {v:.2f}" for k, v in sorted(weights.items(), key=lambda kv: -kv[1]))
    per_domain = Counter(str(row.domain) for row in rows)
    counts = ", ".join(f"{d} {n}" for d, n in sorted(per_domain.items()))
    note = f"; nothing shipped stands for {', '.join(absent)}" if absent else ""
    return Reference(rows, f"train_mix {{{label}}} ({len(rows)} shipped rows: "
                     f"{counts}{note})", stats)


def data_reference(path: str | Path, limit: int = DEFAULT_LIMIT,
                   holdout_fraction: float | None = None) -> Reference:
    """A drafter's training data (without the holdout split, when one is given)."""
    from workloads.sampler import in_holdout

    stats = LoadStats()
    rows: Iterable[TextRow] = iter_rows(path, stats)
    if holdout_fraction is not None:
        rows = (r for r in rows if not in_holdout(r, holdout_fraction))
    kept = bottom_k(rows, limit)
    if not kept:
        raise TrainingDataError(f"training data {path}: no usable rows ({stats.describe()})")
    more = f", subsampled from {stats.rows}" if stats.rows > len(kept) else ""
    return Reference(kept, f"train_data {path} ({len(kept)} rows{more})", stats)


def drafter_reference(train_data: str | Path | None, train_mix: Mapping[str, float] | None,
                      *, limit: int = DEFAULT_LIMIT, mix_rows: int = MIX_ROWS,
                      holdout_fraction: float | None = None) -> Reference:
    """The drafter's reference: its training data when known, else its mix."""
    if train_data:
        return data_reference(train_data, limit, holdout_fraction)
    if train_mix:
        return mix_reference(train_mix, mix_rows)
    raise SampleError("the drafter has neither train_data nor train_mix")
