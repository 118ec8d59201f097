"""The operator's view, part two: capacity under the SLOs. Per variant, workload and load kind,
the highest measured load whose requests meet the goodput SLOs (`slo.*`,
grid/analysis/goodput.py), with its interval; what the variant serves (goodput tok/s, per GPU)
and costs there; per workload, the variant that serves the most there. Attainment, the
meets/misses/undecided rule (`boundary`) and the interval: docs/report.md ("Capacity under the
SLOs"). The capacity search (grid/questions/capacity/) reads its cells by this same rule."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import LEVEL, excludes_zero, interval
from grid.analysis.cellstats import CellStats
from grid.analysis.pareto import point_energy, point_gpus, usd_per_million_tokens
from grid.analysis.points import Point, fmt_load, points
from grid.analysis.winners import NO_DIFFERENCE, win_share

ATTAINMENT = 0.9
"""Share of requests that must meet the SLOs at a load for the load to count as served."""
MEETS, MISSES, UNDECIDED = "meets", "misses", "undecided"
_METRICS = ("output_tok_s", "goodput_tok_s")
T = TypeVar("T")


@dataclass(frozen=True)
class Attainment:
    """One load's SLO attainment: of its steady windows' requests, those that met the SLOs."""

    good: int
    requests: int
    over_saturated: bool = False
    """A cell of the load was stopped over-saturated: a miss whatever its attainment."""
    dispersion: float = 1.0
    """How much more the share varies between the load's repeats than a binomial sample's
    (`pooled`): the interval counts good / dispersion of requests / dispersion."""

    @property
    def value(self) -> float:
        return self.good / self.requests if self.requests else math.nan

    @cached_property
    def interval(self) -> tuple[float, float]:
        """The exact binomial (Clopper-Pearson) interval at LEVEL, of the counts shrunk by the
        dispersion (its beta quantiles take fractional counts); (0, 1) without requests."""
        if not self.requests:
            return 0.0, 1.0
        from scipy.stats import beta  # here: scipy.stats adds ~0.7 s to a CLI start
        x, n, tail = self.good / self.dispersion, self.requests / self.dispersion, (1 - LEVEL) / 2
        lo = 0.0 if self.good == 0 else float(beta.ppf(tail, x, n - x + 1))
        hi = 1.0 if self.good == self.requests else float(beta.ppf(1 - tail, x + 1, n - x))
        return lo, hi

    def verdict(self, target: float = ATTAINMENT) -> str:
        lo, hi = self.interval
        if self.over_saturated or hi < target:
            return MISSES
        return MEETS if lo >= target else UNDECIDED

    def holds(self, target: float = ATTAINMENT) -> bool:
        """Not a miss, and the point estimate reaches the target (NaN does not)."""
        return self.verdict(target) != MISSES and self.value >= target

    def as_json(self, target: float = ATTAINMENT) -> dict:
        lo, hi = self.interval
        return {"attainment": None if math.isnan(self.value) else round(self.value, 4),
                "interval": [round(lo, 4), round(hi, 4)], "good": self.good,
                "requests": self.requests, "over_saturated": self.over_saturated,
                "verdict": self.verdict(target),
                **({"dispersion": round(self.dispersion, 3)} if self.dispersion != 1 else {})}


def fewest_to_meet(target: float = ATTAINMENT) -> int:
    """The fewest requests, all within the SLOs, whose interval lies at or above `target`
    (< 1): the exact interval's low end for n of n is ((1 - LEVEL) / 2) ** (1 / n)."""
    n = math.ceil(math.log((1 - LEVEL) / 2) / math.log(target))
    return n if Attainment(n, n).verdict(target) == MEETS else n + 1  # float rounding


def cell_attainments(table: pd.DataFrame) -> dict[str, Attainment]:
    """Each analysed cell's attainment (a CellStats table: its steady window's requests and
    the share of them that met the SLOs), by cell id."""
    n = pd.to_numeric(table.window_requests).fillna(0).to_numpy(dtype=int)
    share = table.slo_attainment.to_numpy(dtype=float)
    good = np.where((n > 0) & np.isfinite(share), np.rint(share * n), 0).astype(int)
    saturated = (table.stop_reason == "over_saturated").to_numpy(dtype=bool) if (
        "stop_reason" in table) else np.zeros(len(table), dtype=bool)
    return {str(c): Attainment(int(g), int(k), bool(o)) for c, g, k, o in
            zip(table.cell_id, good, n, saturated, strict=True)}


def pooled(parts: Sequence[Attainment]) -> Attainment:
    """A load's repeats as one sample of requests, with their dispersion: Pearson's X² of the
    repeats' shares against the pooled one over its R - 1 degrees of freedom, at least 1 (the
    quasi-binomial estimate of a beta-binomial's variance inflation: repeats that agree as a
    binomial sample would add no width; repeats whose shares differ more widen the interval as
    if there were fewer requests)."""
    good, requests = sum(a.good for a in parts), sum(a.requests for a in parts)
    measured = [a for a in parts if a.requests]
    share = good / requests if requests else math.nan
    dispersion = 1.0
    if len(measured) >= 2 and 0 < share < 1:
        x2 = sum((a.good - a.requests * share) ** 2 / (a.requests * share * (1 - share))
                 for a in measured)
        dispersion = max(1.0, x2 / (len(measured) - 1))
    return Attainment(good, requests, any(a.over_saturated for a in parts), dispersion)


@dataclass(frozen=True)
class Boundary:
    """The rule read on attainments ordered by load (indices into them; None: no such load)."""

    capacity: int | None
    low: int | None
    """The highest load meeting below the first miss: the interval's low end."""
    first_miss: int | None

    def at(self, loads: Sequence[T], none: T) -> tuple[T, ...]:
        """(capacity, low, first miss, the load below the first miss: the highest when none
        misses) as loads; `none` where there is no such load."""
        below = len(loads) if self.first_miss is None else self.first_miss
        found = (self.capacity, self.low, self.first_miss, below - 1 if below else None)
        return tuple(none if i is None else loads[i] for i in found)


def boundary(attainments: Sequence[Attainment], target: float = ATTAINMENT) -> Boundary:
    """The capacity, the interval's low end and the first miss (module doc)."""
    verdicts = [a.verdict(target) for a in attainments]
    first_miss = verdicts.index(MISSES) if MISSES in verdicts else None
    below = range(len(verdicts) if first_miss is None else first_miss)
    low = max((i for i in below if verdicts[i] == MEETS), default=None)
    capacity = low
    for i in below[0 if low is None else low + 1:]:
        if not attainments[i].holds(target):
            break
        capacity = i
    return Boundary(capacity, low, first_miss)


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
    """The capacity, its interval [lo, hi] and whether a tested load misses (module doc); a load
    that is none: -inf."""
    lo: float
    hi: float
    bracketed: bool
    attainments: list[Attainment] = field(default_factory=list)
    """Each tested load's attainment, in the order of `loads`."""
    attainment: float = math.nan
    """SLO attainment at the capacity load (at the lowest tested load when none is served)."""
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
    first_miss: float | None = None
    """The lowest tested load shown to miss the SLOs (None: none is)."""

    @property
    def served(self) -> bool:
        return math.isfinite(self.capacity)

    @property
    def undetermined(self) -> bool:
        """No tested load is shown to meet the SLOs and the lowest is not shown to miss them:
        the capacity is not known, and not claimed (NaN)."""
        return math.isnan(self.capacity)

    @property
    def goodput_per_gpu(self) -> float:
        return self.goodput_tok_s / self.gpus if self.gpus else math.nan

    def load_text(self, x: float) -> str:
        if x == -math.inf:
            return f"none (below {min(self.loads):g})"
        return fmt_load(self.load_kind, x)

    def _undecided(self, above: float) -> list[str]:
        top = math.inf if self.first_miss is None else self.first_miss
        return [self.load_text(x) for x, a in zip(self.loads, self.attainments, strict=True)
                if above < x < top and a.verdict(self.target) == UNDECIDED]

    def span(self) -> str:
        """`between c=1, the last load shown to meet them, and c=16, the first shown to miss
        them; undecided at c=4`: the range a served capacity lies in, by the loads' verdicts."""
        undecided = self._undecided(self.lo)
        where = (f"between {self.load_text(self.lo)}, the last load shown to meet them, and "
                 f"{self.load_text(self.first_miss)}, the first shown to miss them"
                 if self.first_miss is not None else
                 f"from {self.load_text(self.lo)}, the last load shown to meet them; no tested "
                 f"load shown to miss them")
        return where + (f"; undecided at {', '.join(undecided)}" if undecided else "")

    def describe(self) -> str:
        share = f"{self.target:.0%} of requests within the SLOs"
        if self.undetermined:
            undecided = self._undecided(-math.inf)
            return (f"{self.variant} on {self.workload}: capacity undetermined with {share}: no "
                    f"tested load is shown to meet them (undecided at {', '.join(undecided)}"
                    + (f"; {self.load_text(self.first_miss)} is the first shown to miss them"
                       if self.first_miss is not None else "")
                    + f"); a load settles as meeting them with {fewest_to_meet(self.target)} "
                    f"steady-window requests all within them (raise load.requests_per_stream "
                    f"or add repeats)")
        if not self.served:
            return (f"{self.variant} on {self.workload}: does not hold the SLOs even at "
                    f"{self.load_text(min(self.loads))} ({share}; attainment there "
                    f"{self.attainment:.0%})")
        head = self.load_text(self.capacity)
        if not self.bracketed:
            head = (f"at least {head}, the highest tested," if self.capacity == self.loads[-1]
                    else f"{head} (no tested load shown to miss the SLOs)")
        return (f"{self.variant} on {self.workload}: capacity {head} with {share} ("
                f"{self.span()}), "
                f"goodput {self.goodput_tok_s:.0f} tok/s [{self.goodput_tok_s_lo:.0f}, "
                f"{self.goodput_tok_s_hi:.0f}]")

    def as_json(self) -> dict:
        return {"variant": self.variant, "workload": self.workload,
                "load_kind": self.load_kind, "tested": self.loads, "target": self.target,
                "capacity": self.capacity, "undetermined": self.undetermined,
                "interval": [self.lo, self.hi], "first_miss": self.first_miss,
                "bracketed": self.bracketed, "attainment": self.attainment,
                "attainments": {f"{x:g}": a.as_json(self.target)
                                for x, a in zip(self.loads, self.attainments, strict=True)},
                "goodput_tok_s": self.goodput_tok_s,
                "goodput_tok_s_interval": [self.goodput_tok_s_lo, self.goodput_tok_s_hi],
                "output_tok_s": self.output_tok_s, "gpus": self.gpus,
                "goodput_tok_s_per_gpu": self.goodput_per_gpu,
                "usd_per_mtok": self.usd_per_mtok, "usd_per_good_mtok": self.usd_per_good_mtok,
                "j_per_token": self.j_per_token, "statement": self.describe()}


def capacities(stats: CellStats, gpus: Mapping[str, float | None], target: float = ATTAINMENT,
               usd_per_gpu_hour: float | None = None,
               j_per_token: Mapping[str, float] | None = None) -> list[Capacity]:
    """One Capacity per (variant, workload, load kind) with a measured load. `gpus`: cell id ->
    GPUs that served it; `j_per_token`: cell id -> joules per output token."""
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points(stats, _METRICS):
        groups.setdefault((p.variant, p.workload, p.load_kind), []).append(p)
    by_cell = cell_attainments(stats.table)
    out = []
    for (variant, workload, kind), pts in sorted(groups.items()):
        pts = sorted(pts, key=lambda p: p.load)
        loads = [p.load for p in pts]
        atts = [pooled([by_cell[c] for c in p.cell_ids]) for p in pts]
        rule = boundary(atts, target)
        capacity, low, miss, hi = rule.at(loads, -math.inf)
        if rule.low is None and rule.capacity is not None:
            capacity = math.nan  # loads that hold by their point estimate, none shown to meet
        cap = Capacity(variant, workload, kind, loads, target, capacity, low, hi,
                       bracketed=rule.first_miss is not None, attainments=atts,
                       attainment=atts[rule.capacity or 0].value,
                       first_miss=None if rule.first_miss is None else float(miss))
        there = pts[rule.capacity or 0]
        if cap.served:
            cap.goodput_tok_s = there.values["goodput_tok_s"]
            cap.output_tok_s = there.values["output_tok_s"]
            cap.replicates = there.replicates["goodput_tok_s"]
            cap.goodput_tok_s_lo, cap.goodput_tok_s_hi = interval(cap.replicates)
            cap.gpus = point_gpus(there, gpus)
            cap.usd_per_mtok, cap.usd_per_good_mtok = (
                usd_per_million_tokens(v, cap.gpus, usd_per_gpu_hour)
                for v in (cap.output_tok_s, cap.goodput_tok_s))
            cap.j_per_token = point_energy(there, j_per_token)
        out.append(cap)
    return out


def serves_most(caps: list[Capacity]) -> list[dict]:
    """Per workload and load kind with two or more served variants: the variant whose capacity
    point serves the most goodput per GPU (per server when any GPU count is unknown), the
    runner-up, the margin with its interval and whether it excludes zero."""
    out = []
    for workload, kind in sorted({(c.workload, c.load_kind) for c in caps}):
        mine = [c for c in caps if (c.workload, c.load_kind) == (workload, kind) and c.served]
        if len(mine) < 2:
            continue
        per_gpu = all(c.gpus for c in mine)
        scale = {c.variant: (c.gpus if per_gpu and c.gpus else 1.0) for c in mine}
        win, second = sorted(mine, key=lambda c: -c.goodput_tok_s / scale[c.variant])[:2]
        a, b = (c.goodput_tok_s / scale[c.variant] for c in (win, second))
        with np.errstate(invalid="ignore", divide="ignore"):
            lo, hi = interval((win.replicates / scale[win.variant])
                              / (second.replicates / scale[second.variant]) - 1.0)
        out.append({"workload": workload, "load_kind": kind,
                    "metric": "goodput_tok_s_per_gpu" if per_gpu else "goodput_tok_s",
                    "winner": win.variant, "value": a, "capacity": win.capacity,
                    "runner_up": second.variant, "runner_up_value": b,
                    "margin": a / b - 1.0 if b else math.nan, "lo": lo, "hi": hi,
                    "wins_share": win_share({c.variant: c.replicates / scale[c.variant]
                                             for c in mine}, win.variant),
                    "verdict": "winner" if excludes_zero(lo, hi) else NO_DIFFERENCE})
    return out
