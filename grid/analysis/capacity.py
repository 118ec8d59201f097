"""The operator's view, part two: capacity under the SLOs. Per variant, workload and load kind,
the highest measured load whose requests meet the goodput SLOs (`slo.*`, grid/analysis/
goodput.py), with its interval; what the variant serves there (goodput tok/s, per GPU), what
it costs there; and, per workload, the variant that serves the most at that SLO.

- A load **meets the SLOs** when its SLO attainment (the share of the steady window's requests
  that succeeded and met every SLO set) is at least `target` (default 0.9: DistServe's goodput
  is the highest rate at which 90 % of requests meet their SLOs).
- **Capacity** = the last load of the run of loads, from the lowest up, that meets them (a load
  above the first miss does not count: the service held the SLOs up to there). -inf: the
  lowest tested load misses already; the highest tested load when every load meets them (then
  `bracketed` is False: the true capacity may be higher).
- **Interval**: the same rule applied to each bootstrap replicate of the attainments (repeats
  averaged as in grid/analysis/decision.py), the 2.5 and 97.5 percentiles of the loads found
  (inverted-CDF rule: a tested load, or -inf). A replicate that drew no request of a load's
  steady window has no attainment there and counts as a miss (the conservative side).
- An **over-saturated** load (a cell stopped because the server fell behind its load:
  grid/report/stopping.py) counts as a miss whatever its attainment: its numbers are no
  steady state, so no capacity is claimed at or beyond it.
- **Serves most**: among the variants of a workload and load kind, the one whose capacity point
  has the highest goodput tok/s per GPU (goodput tok/s when any variant's GPUs are unknown), its
  margin over the runner-up with the interval of the ratio of their replicates."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from grid.analysis.bootstrap import LEVEL, excludes_zero, interval
from grid.analysis.cellstats import CellStats
from grid.analysis.decision import NO_DIFFERENCE
from grid.analysis.pareto import point_energy, point_gpus, usd_per_million_tokens
from grid.analysis.points import Point, points

ATTAINMENT = 0.9
"""Share of requests that must meet the SLOs at a load for the load to count as served."""
_METRICS = ("output_tok_s", "goodput_tok_s", "slo_attainment")


def capacity_of(loads: np.ndarray, attainment: np.ndarray, target: float = ATTAINMENT) -> float:
    """The last load of the leading run (loads ascending) whose attainment >= target; -inf when
    the first load misses (NaN misses)."""
    meets = np.asarray(attainment, dtype=float) >= target
    if not meets.size or not meets[0]:
        return -math.inf
    misses = np.flatnonzero(~meets)
    last = int(misses[0]) - 1 if misses.size else len(meets) - 1
    return float(loads[last])


@dataclass
class Capacity:
    """One variant's capacity under the SLOs on one workload and load kind."""

    variant: str
    workload: str
    load_kind: str
    """`concurrency` (closed loop) or `rate` (open loop)."""
    loads: list[float]
    """The tested loads, ascending."""
    target: float
    """The attainment a load needs (ATTAINMENT unless given)."""
    capacity: float
    """The highest served load (capacity_of); -inf when none is."""
    lo: float
    hi: float
    bracketed: bool
    """False when every tested load met the SLOs: the capacity is at least `capacity`."""
    attainment: float = math.nan
    """SLO attainment at the capacity load."""
    goodput_tok_s: float = math.nan
    goodput_tok_s_lo: float = math.nan
    goodput_tok_s_hi: float = math.nan
    output_tok_s: float = math.nan
    gpus: float | None = None
    """GPUs that served the capacity point's cells (None = unknown)."""
    usd_per_mtok: float = math.nan
    """Dollars per million output tokens at the capacity point (with a price)."""
    usd_per_good_mtok: float = math.nan
    """Dollars per million output tokens of requests that met the SLOs (goodput)."""
    j_per_token: float = math.nan
    """Joules per output token at the capacity point (where power was read)."""
    replicates: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    """Goodput tok/s replicates at the capacity point (for the comparison of variants)."""

    @property
    def served(self) -> bool:
        return math.isfinite(self.capacity)

    @property
    def goodput_per_gpu(self) -> float:
        return self.goodput_tok_s / self.gpus if self.gpus else math.nan

    def load_text(self, x: float) -> str:
        if x == -math.inf:
            return f"none (below {min(self.loads):g})"
        return f"c={x:g}" if self.load_kind == "concurrency" else f"{x:g}/s"

    def describe(self) -> str:
        share = f"{self.target:.0%} of requests within the SLOs"
        if not self.served:
            return (f"{self.variant} on {self.workload}: does not hold the SLOs even at "
                    f"{self.load_text(min(self.loads))} ({share}; attainment there "
                    f"{self.attainment:.0%})")
        head = (self.load_text(self.capacity) if self.bracketed else
                f"at least {self.load_text(self.capacity)}, the highest tested,")
        return (f"{self.variant} on {self.workload}: capacity {head} with {share} (95% "
                f"interval {self.load_text(self.lo)} .. {self.load_text(self.hi)}), goodput "
                f"{self.goodput_tok_s:.0f} tok/s [{self.goodput_tok_s_lo:.0f}, "
                f"{self.goodput_tok_s_hi:.0f}]")

    def as_json(self) -> dict:
        return {"variant": self.variant, "workload": self.workload,
                "load_kind": self.load_kind, "tested": self.loads, "target": self.target,
                "capacity": self.capacity, "interval": [self.lo, self.hi],
                "bracketed": self.bracketed, "attainment": self.attainment,
                "goodput_tok_s": self.goodput_tok_s,
                "goodput_tok_s_interval": [self.goodput_tok_s_lo, self.goodput_tok_s_hi],
                "output_tok_s": self.output_tok_s, "gpus": self.gpus,
                "goodput_tok_s_per_gpu": self.goodput_per_gpu,
                "usd_per_mtok": self.usd_per_mtok, "usd_per_good_mtok": self.usd_per_good_mtok,
                "j_per_token": self.j_per_token, "statement": self.describe()}


def _at(pts: list[Point], load: float) -> Point:
    return next(p for p in pts if p.load == load)


def capacities(stats: CellStats, gpus: Mapping[str, float | None], target: float = ATTAINMENT,
               usd_per_gpu_hour: float | None = None,
               j_per_token: Mapping[str, float] | None = None) -> list[Capacity]:
    """One Capacity per (variant, workload, load kind) with a measured load. `gpus`: cell id ->
    GPUs that served it; `j_per_token`: cell id -> joules per output token."""
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points(stats, _METRICS):
        groups.setdefault((p.variant, p.workload, p.load_kind), []).append(p)
    out = []
    for (variant, workload, kind), pts in sorted(groups.items()):
        pts = sorted(pts, key=lambda p: p.load)
        loads = np.array([p.load for p in pts])
        held = np.array([math.nan if p.over_saturated else 1.0 for p in pts])
        point = capacity_of(loads, held * [p.values["slo_attainment"] for p in pts], target)
        reps = np.stack([p.replicates["slo_attainment"] for p in pts], axis=1) * held
        found = np.array([capacity_of(loads, r, target) for r in reps])
        tail = (1 - LEVEL) / 2 * 100
        lo, hi = (float(v) for v in np.percentile(found, [tail, 100 - tail],
                                                   method="inverted_cdf"))
        cap = Capacity(variant, workload, kind, [float(x) for x in loads], target, point, lo,
                       hi, bracketed=not (math.isfinite(point) and point == loads[-1]))
        there = _at(pts, point) if math.isfinite(point) else pts[0]
        cap.attainment = there.values["slo_attainment"]
        if cap.served:
            good = there.values["goodput_tok_s"]
            cap.goodput_tok_s = good
            cap.goodput_tok_s_lo, cap.goodput_tok_s_hi = interval(
                there.replicates["goodput_tok_s"])
            cap.output_tok_s = there.values["output_tok_s"]
            cap.gpus = point_gpus(there, gpus)
            cap.usd_per_mtok = usd_per_million_tokens(cap.output_tok_s, cap.gpus,
                                                      usd_per_gpu_hour)
            cap.usd_per_good_mtok = usd_per_million_tokens(good, cap.gpus, usd_per_gpu_hour)
            cap.j_per_token = point_energy(there, j_per_token)
            cap.replicates = there.replicates["goodput_tok_s"]
        out.append(cap)
    return out


def serves_most(caps: list[Capacity]) -> list[dict]:
    """Per workload and load kind with two or more served variants: the variant whose capacity
    point serves the most goodput per GPU (per server when any GPU count is unknown), the
    runner-up, the margin with its interval and whether it excludes zero."""
    out = []
    keys = sorted({(c.workload, c.load_kind) for c in caps})
    for workload, kind in keys:
        mine = [c for c in caps if (c.workload, c.load_kind) == (workload, kind) and c.served]
        if len(mine) < 2:
            continue
        per_gpu = all(c.gpus for c in mine)
        scale = {c.variant: (c.gpus if per_gpu and c.gpus else 1.0) for c in mine}
        ranked = sorted(mine, key=lambda c: -c.goodput_tok_s / scale[c.variant])
        win, second = ranked[0], ranked[1]
        a, b = win.goodput_tok_s / scale[win.variant], second.goodput_tok_s / scale[
            second.variant]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = (win.replicates / scale[win.variant]) / (
                second.replicates / scale[second.variant]) - 1.0
        lo, hi = interval(ratio)
        out.append({"workload": workload, "load_kind": kind,
                    "metric": "goodput_tok_s_per_gpu" if per_gpu else "goodput_tok_s",
                    "winner": win.variant, "value": a, "capacity": win.capacity,
                    "runner_up": second.variant, "runner_up_value": b,
                    "margin": a / b - 1.0 if b else math.nan, "lo": lo, "hi": hi,
                    "verdict": "winner" if excludes_zero(lo, hi) else NO_DIFFERENCE})
    return out
