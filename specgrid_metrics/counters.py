"""Increases of a server's monotonic /metrics series over a cell: what every counter-based figure
(accept length from counters, tokens, requests) is computed from. Pure: no sockets."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

Sample = tuple[float, str, Mapping[str, str], float]
"""(scraped_at, metric name, labels, value), as the server probe returns them."""

COUNTER_SUFFIXES = ("_total", "_count", "_sum")
"""Monotonic series: counters (`_total`) and histograms' `_count`/`_sum`."""


def counter_deltas(samples: Iterable[Sample]
                   ) -> dict[tuple[str, str], float]:
    """Per-cell increase of every monotonic series, keyed by (name, labels as sorted JSON):
    the sum of its rises between consecutive scrapes. A fall means the counter restarted
    (a server relaunched): the new value is counted from zero, as Prometheus' increase()
    does."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for t, name, labels, value in samples:
        if name.endswith(COUNTER_SUFFIXES):
            key = (name, json.dumps(dict(labels), sort_keys=True))
            series.setdefault(key, []).append((t, value))
    out = {}
    for key, points in series.items():
        points.sort(key=lambda p: p[0])
        total = 0.0
        for (_, prev), (_, cur) in zip(points, points[1:], strict=False):
            total += cur - prev if cur >= prev else cur
        out[key] = total
    return out


def counter_delta(samples: Sequence[Sample], name: str) -> float | None:
    """Σ over label sets of the increase of counter ``name`` across the scrapes
    (counter_deltas: a counter that went down, a server restart, counts from
    zero); None when it was not scraped at least twice."""
    if len({t for t, metric, _, _ in samples if metric == name}) < 2:
        return None
    return sum(v for (metric, _), v in counter_deltas(samples).items() if metric == name)
