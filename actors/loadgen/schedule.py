"""Pure, seeded request plans: prompt order, open-loop arrival schedules, and the split of a
cell's requests over N client processes. No clocks, no sockets.

A cell's requests are numbered globally: warmup requests take prompt positions 0..W-1 of the
seeded prompt order, measured request n takes position W + n (cycling). Arrival offsets are
absolute (seconds from the start of the measured phase), computed once from the seed, so a late
wake-up never shifts later arrivals (no accumulating sleeps). Splitting over N clients assigns
each global index to exactly one client by smooth weighted round-robin (weights = concurrency
shares in closed loop, equal in open loop): deterministic, disjoint, and the union is the
single-client plan.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterable, Iterator, Sequence


def prompt_order(n_prompts: int, seed: int) -> list[int]:
    """Seeded shuffle of prompt indices; requests cycle through it in order."""
    order = list(range(n_prompts))
    random.Random(f"specgrid-prompts-{seed}").shuffle(order)
    return order


def arrival_offsets(
    rate: float, arrival: str = "poisson", burstiness: float = 1.0, seed: int = 0
) -> Iterator[float]:
    """Endless seeded absolute arrival offsets (s from the phase start), mean gap 1/rate: the
    first request at 0, then the running sum of the gaps. ``poisson``: exponential gaps (CV 1);
    ``gamma``: shape ``burstiness``, scale 1/(rate*burstiness) (CV = 1/sqrt(burstiness): < 1
    burstier, > 1 smoother; 1 = Poisson); ``constant``: exactly n / rate."""
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if arrival == "constant":
        yield from (n / rate for n in itertools.count())
        return
    rng = random.Random(f"specgrid-arrivals-{seed}")
    if arrival == "poisson":
        draw = functools.partial(rng.expovariate, rate)
    elif arrival == "gamma":
        if not burstiness > 0:
            raise ValueError(f"burstiness must be > 0, got {burstiness}")
        draw = functools.partial(rng.gammavariate, burstiness, 1.0 / (rate * burstiness))
    else:
        raise ValueError(f"unknown arrival law {arrival!r}")
    t = 0.0
    while True:
        yield t
        t += draw()


def assignment(weights: Sequence[int]) -> Iterator[int]:
    """Endless sequence of client indices by smooth weighted round-robin: over any window of
    Σweights consecutive indices client j appears weights[j] times; equal weights give
    0, 1, ..., N-1, 0, 1, ...; weight 0 never appears."""
    if not weights or any(w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {list(weights)}")
    total = sum(weights)
    current = [0] * len(weights)
    while True:
        best = 0
        for j, w in enumerate(weights):
            current[j] += w
            if current[j] > current[best]:
                best = j
        current[best] -= total
        yield best


def client_indices(total: int | None, weights: Sequence[int], client: int) -> Iterator[int]:
    """Global request indices (0..total-1, or endless for None) assigned to ``client``."""
    if len(weights) == 1:
        yield from (range(total) if total is not None else itertools.count())
        return
    if weights[client] == 0:
        return
    for n, owner in zip(
        range(total) if total is not None else itertools.count(), assignment(weights), strict=False
    ):
        if owner == client:
            yield n


def client_arrivals(
    total: int | None,
    weights: Sequence[int],
    client: int,
    rate: float,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
    horizon_s: float | None = None,
) -> Iterator[tuple[int, float]]:
    """(global index, absolute offset) of this client's open-loop arrivals: the cell's single
    schedule (``rate`` = the cell's total rate) restricted to this client's indices, stopping
    at ``total`` requests or at offsets >= ``horizon_s``."""
    offsets = arrival_offsets(rate, arrival, burstiness, seed)
    owners = assignment(weights)
    indices = range(total) if total is not None else itertools.count()
    for n, off, owner in zip(indices, offsets, owners, strict=False):
        if horizon_s is not None and off >= horizon_s:
            return
        if owner == client:
            yield n, off


def longest_gap(offsets: Iterable[float]) -> float:
    """The widest gap between consecutive offsets of an ascending sequence (0 for fewer than
    two)."""
    widest, previous = 0.0, None
    for off in offsets:
        if previous is not None:
            widest = max(widest, off - previous)
        previous = off
    return widest


def longest_arrival_gap(total: int | None, rate: float, arrival: str = "poisson",
                        burstiness: float = 1.0, seed: int = 0,
                        horizon_s: float | None = None) -> float:
    """The widest gap between consecutive arrivals of a cell's open-loop schedule (every
    client's arrivals together), stopping as :func:`client_arrivals` does: at ``total``
    requests or at offsets >= ``horizon_s`` (one of them must be set)."""
    if total is None and horizon_s is None:
        raise ValueError("an open-loop schedule needs a request count or a horizon")
    offsets = arrival_offsets(rate, arrival, burstiness, seed)
    if total is not None:
        offsets = itertools.islice(offsets, total)
    if horizon_s is not None:
        offsets = itertools.takewhile(lambda off: off < horizon_s, offsets)
    return longest_gap(offsets)
