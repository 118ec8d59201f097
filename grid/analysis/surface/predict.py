"""A drafter on the node's surface: the predicted speedup of a drafter (its acceptance profile
on one domain, profile.py) at every (load B, depth k) of a step cost surface (cost.py), the
break-even accept length there, the best depth per load and the depth schedule it makes.
Pure: numpy.

    speedup(B, k) = AL(k) / c(B, k)        break-even AL(B, k) = c(B, k)

(a drafter pays at (B, k) where its AL(k) exceeds c(B, k)). The interval takes the r-th
replicate of AL(k) (the profile's marginals, resampled over its units) over the r-th replicate
of c(B, k) (the cells' throughputs): the two are drawn independently, so pairing them by index
propagates both uncertainties.

The best depth at a load is the depth of the highest predicted speedup among depth 0 (the
baseline, speedup 1: speculation off) and the depths whose whole interval lies above 1 (a
depth whose interval spans the baseline's is not chosen over it on a prediction), the smaller
on a tie; a depth beyond the profile's positions is not predicted. Beside it, the depths the
prediction does not rule out (`plausible_depths`): every depth, the baseline's 0 included, whose
speedup interval reaches the best one's (its high end at or above the best's low end; the
baseline's interval is the point 1), the best among them: a point choice, its uncertainty said.
The schedule (`depth_schedule`): each load's best depth from that load up to the next one's,
the first from batch 1, equal neighbours merged; an engine's words for it come from the engine
(`Engine.depth_setting`, which the plan reaches: pass it as `setting`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grid.analysis.bootstrap import interval
from grid.analysis.surface.cost import Cost, Key
from grid.analysis.surface.profile import DomainProfile

Schedule = tuple[tuple[int, int], ...]
"""(first running batch, depth) per tier, ascending; depth 0: speculation off."""


@dataclass(frozen=True)
class Prediction:
    """A drafter's predicted speedup at one (B, k)."""

    load: int
    """B."""
    depth: int
    """k."""
    accept_length: float
    """AL(k) from the profile."""
    break_even: float
    """The accept length at which speculation only breaks even here: c(B, k)."""
    speedup: float
    """AL(k) / c(B, k) (1 = the baseline's throughput)."""
    reps: np.ndarray = field(repr=False)
    """The speedup's replicates (AL(k) replicate r over c(B, k) replicate r)."""

    @property
    def interval(self) -> tuple[float, float]:
        return interval(self.reps)

    def as_json(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {"load": self.load, "depth": self.depth, "accept_length": self.accept_length,
                "break_even": self.break_even, "speedup": self.speedup, "interval": [lo, hi]}


def predict(costs: Mapping[Key, Cost], profile: DomainProfile) -> dict[Key, Prediction]:
    """The prediction at every (B, k) of the surface within the profile's positions."""
    out = {}
    for (b, k), cost in sorted(costs.items()):
        if not 1 <= k <= profile.positions:
            continue
        length = profile.accept_length(k)
        n = len(cost.reps) if profile.replicates is None else min(len(cost.reps),
                                                                   len(profile.replicates))
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = profile.length_replicates(k, n) / cost.reps[:n]
        out[(b, k)] = Prediction(b, k, length, cost.value, length / cost.value, reps)
    return out


def beats_baseline(p: Prediction) -> bool:
    """The speedup's whole interval above 1 (the baseline's): a depth whose interval spans 1
    is not chosen over the baseline on a prediction alone."""
    lo, _ = p.interval
    return bool(p.speedup > 1.0 and lo > 1.0)


def best_depths(predictions: Mapping[Key, Prediction]) -> dict[int, int]:
    """Load -> the depth of the highest predicted speedup among the depths that beat the
    baseline (`beats_baseline`), else 0 (the baseline); the smaller depth on a tie."""
    out = {}
    for b in sorted({key[0] for key in predictions}):
        value = {0: 1.0, **{k: p.speedup for (load, k), p in predictions.items()
                            if load == b and beats_baseline(p)}}
        out[b] = min(value, key=lambda d: (-value[d], d))
    return out


def plausible_depths(predictions: Mapping[Key, Prediction]) -> dict[int, tuple[int, ...]]:
    """Load -> the depths not ruled out beside the best (`best_depths`), ascending: every depth,
    0 (the baseline) included, whose speedup interval reaches the best one's, its high end at
    or above the best's low end. The baseline's interval is the point 1 (so is the best's where
    the best is the baseline); a depth whose interval is not finite is left out. The best is
    always in; the baseline is in exactly where it is the best (a drafting best's interval lies
    above 1), and then with every depth whose interval reaches 1."""
    out = {}
    for b, best in best_depths(predictions).items():
        ends = {0: (1.0, 1.0), **{k: p.interval for (load, k), p in predictions.items()
                                  if load == b}}
        floor = ends[best][0]
        out[b] = tuple(k for k in sorted(ends) if ends[k][1] >= floor)
    return out


def depth_schedule(best: Mapping[int, int]) -> Schedule:
    """Each load's best depth from that load up to the next one's, the first from batch 1,
    equal neighbours merged (as vLLM's tune_speculative_k builds its ranges)."""
    tiers: list[tuple[int, int]] = []
    for load, depth in sorted(best.items()):
        if not tiers or tiers[-1][1] != depth:
            tiers.append((load if tiers else 1, depth))
    return tuple(tiers)


def schedule_text(tiers: Schedule) -> str:
    """The one way a schedule is written: `depth 3 from batch 1, baseline from batch 32`."""
    return ", ".join(("baseline" if d == 0 else f"depth {d}") + f" from batch {b}"
                     for b, d in tiers) or "none"


def depth_plan(predictions: Mapping[Key, Prediction],
               setting: Callable[[Schedule], Mapping[str, Any] | None] | None = None
               ) -> dict[str, Any]:
    """The best depth per load, the depths not ruled out beside it (`plausible_depths`), the
    schedule (tiers and in words), the `speculative_depth`
    value a variant takes (None where it never drafts: serve the baseline) and, with
    `setting`, the engine's words for it (`Engine.depth_setting` as the plan calls it)."""
    best = best_depths(predictions)
    tiers = depth_schedule(best)
    drafts = any(d > 0 for _, d in tiers)
    return {"best": {str(b): d for b, d in best.items()},
            "plausible_depths": {str(b): list(ks) for b, ks in
                                 plausible_depths(predictions).items()},
            "schedule": [list(t) for t in tiers], "text": schedule_text(tiers),
            "speculative_depth": [list(t) for t in tiers] if drafts else None,
            "engine": setting(tiers) if setting is not None and drafts else None}
