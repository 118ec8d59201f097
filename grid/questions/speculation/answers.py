"""What the speculation question answers besides the surface, each once, from the drafter's
predicted speedups on it (grid/analysis/surface/predict.py `predict`): the break-even length
at every (B, k) with the drafter placed on it, and the crossover and threshold of the
configured depth through the dense grid's own functions (grid/analysis/decision.py
`crossovers`, grid/analysis/verdict.py `recommend_threshold`: one way to read a crossover from
a curve); and the best single depth, for a server that cannot change its depth with the batch
size."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from grid.analysis.decision import crossovers
from grid.analysis.surface import Prediction
from grid.analysis.verdict import between_runs, recommend_threshold, verdict_of

PAYS, LOSES, UNSURE = "pays", "loses", "unsure"


def placed(p: Prediction) -> str:
    """The drafter on the break-even length at (B, k): `pays` where its speedup's interval lies
    above 1 (its accept length above c(B, k)), `loses` below, `unsure` where it holds 1."""
    lo, hi = p.interval
    return PAYS if lo > 1.0 else LOSES if hi < 1.0 else UNSURE


def _finite(x: float) -> float | None:
    return round(x, 2) if math.isfinite(x) else None


def configured_curve(predictions: Mapping[tuple[int, int], Prediction], depth: int,
                     variant: str, workload: str, spread: float | None) -> pd.DataFrame:
    """The configured depth's predicted speedup over load as the dense grid's speedup table
    holds a measured one (speedup - 1, its replicates, its verdict; one repeat: a prediction's
    interval is its cells' within-run intervals, widened by `spread`, the stated spread
    between repeats, where one is given: grid/analysis/verdict.py `between_runs`)."""
    rows = []
    for (b, k), p in sorted(predictions.items()):
        if k != depth:
            continue
        lo, hi = between_runs(p.speedup, *p.interval, spread)
        verdict = verdict_of(lo - 1.0, hi - 1.0)
        rows.append({"variant": variant, "workload": workload, "load_kind": "concurrency",
                     "load": float(b), "speedup": p.speedup - 1.0, "lo": lo - 1.0,
                     "hi": hi - 1.0, "verdict": verdict, "repeats": 1,
                     "_reps": np.asarray(p.reps) - 1.0})
    return pd.DataFrame(rows)


def crossover_threshold(predictions: Mapping[tuple[int, int], Prediction], depth: int,
                        variant: str, workload: str, spread: float | None
                        ) -> dict[str, Any] | None:
    """The configured depth's crossover (where its predicted speedup crosses 1, 95 %) and the
    speculative_disable_above_batch it makes (its verdicts on intervals widened by `spread`
    where one is given); None with fewer than two loads at that depth."""
    table = configured_curve(predictions, depth, variant, workload, spread)
    found = crossovers(table) if len(table) >= 2 else []
    if not found:
        return None
    cross = found[0]
    threshold = recommend_threshold(table, cross)
    return {"depth": depth, "crossover": _finite(cross.point),
            "interval": [_finite(cross.lo), _finite(cross.hi)], "text": cross.describe(),
            "above_range": cross.point == math.inf, "below_range": cross.point == -math.inf,
            "speculative_disable_above_batch": threshold["speculative_disable_above_batch"],
            "verdict": threshold["verdict"], "plausible_range": threshold["plausible_range"],
            "statement": threshold["statement"]}


def single_depth(speedups: Mapping[tuple[int, int], tuple[float, float, float]],
                 zero: Mapping[int, float] | None = None) -> dict[str, Any] | None:
    """The one depth for a server that drafts a fixed depth (SGLang's speculative_num_steps,
    switched off above where it stops paying), from the speedup (value, 95 % low, high) at each
    (load, depth), predicted or measured: per drafting depth, the loads from the lowest up
    to the last where every one pays (its interval above 1, as `placed`; `last`), each load's
    speedup there and above it what the switched-off server runs, depth 0 (`zero`: load -> its
    speedup over the baseline, measured; 1 where not known), the loads weighing alike in log
    load (the lattice's steps): the depth of the highest mean log speedup, the smaller on a
    tie; `next` the load just above `last` (None at the lattice's top). None where no depth
    pays at the lowest load."""
    loads = sorted({b for b, _ in speedups})
    idle = {b: math.log(z) for b, z in (zero or {}).items() if math.isfinite(z) and z > 0}
    off = sum(idle.get(b, 0.0) for b in loads)
    best: tuple[float, int, int] | None = None
    for k in sorted({k for _, k in speedups if k > 0}):
        last = None
        for b in loads:
            if (b, k) not in speedups or speedups[(b, k)][1] <= 1.0:
                break
            last = b
        if last is None:
            continue
        score = (off + sum(math.log(speedups[(b, k)][0]) - idle.get(b, 0.0)
                           for b in loads if b <= last)) / len(loads)
        if best is None or score > best[0] + 1e-12:
            best = (score, k, last)
    if best is None:
        return None
    _, k, last = best
    above = [b for b in loads if b > last]
    return {"depth": k, "last": last, "next": above[0] if above else None,
            "mean_speedup": round(math.exp(best[0]), 4)}
