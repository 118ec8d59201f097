"""The node's side of speculation: the relative step cost surface c(B, k), measured with the
acceptance forced (grid/analysis/forced.py). Pure: numpy and pandas.

At a load B (concurrency) and depth k, a speculative step costs the same whatever is accepted:
k draft passes, one verify of k + 1 tokens, the fixed overhead. A forced cell at accept length
L (tokens per verify step) runs at T_f tok/s against the baseline's T_b at the same load, so
its step takes L / T_f per request-token against 1 / T_b for a plain decode step:

    c(B, k) = L / (T_f / T_b) = L T_b / T_f       (relative step cost; 1 = a decode step)

and its interval takes each bootstrap replicate's throughputs (and length, where its
replicates are known) through the same formula. Two forced lengths at one (B, k) should give
one cost (`length_checks`: the difference, its interval, whether that holds 0); the surface at
(B, k) is the mean over its lengths.

The decomposition per load (`decompose`: fixed, draft and verify excess), Leviathan's batch-1
speedup beside it (`leviathan_speedup`, `beside_leviathan`) and the interpolation between the
cells measured (`interpolated`: piecewise linear in k at a load, in log B at a depth, replicate
by replicate) are each stated with a worked example in docs/questions.md ("The step cost
surface")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import interval
from grid.analysis.cellstats import CellStats
from grid.analysis.points import points
from grid.analysis.setups import baseline_of, is_baseline
from grid.analysis.surface.cells import CurveCells, configuration

Key = tuple[int, int]
"""(load B, depth k)."""


@dataclass(frozen=True)
class Throughput:
    """One cell's output tok/s and its bootstrap replicates."""

    value: float
    reps: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class ForcedPoint:
    """One measured point of the surface: a speculative server at load B, depth k, accept
    length L (forced, or the drafter's own: `forced_points`)."""

    load: int
    """B: the concurrency (closed loop)."""
    depth: int
    """k: draft tokens per verify step (speculative_num_steps)."""
    length: float
    """Tokens per verify step (the forced length, or the honoured cell's measured one)."""
    throughput: Throughput
    """Output tok/s and its replicates."""
    length_reps: np.ndarray | None = field(default=None, repr=False)
    """The length's replicates, drawn with the throughput's; None: exact."""


@dataclass(frozen=True)
class Cost:
    """c(B, k) and its replicates."""

    load: int
    """B."""
    depth: int
    """k."""
    value: float
    """c(B, k): a speculative step's cost in plain decode steps."""
    reps: np.ndarray = field(repr=False)
    """Its bootstrap replicates."""
    lengths: tuple[float, ...] = ()
    """The forced lengths it was measured at."""

    @property
    def interval(self) -> tuple[float, float]:
        return interval(self.reps)


def step_cost(point: ForcedPoint, baseline: Throughput) -> Cost:
    """c = L T_b / T_f (module docstring) of one forced point against the baseline at its
    load; replicate r pairs the r-th replicate of each."""
    lengths = point.length if point.length_reps is None else point.length_reps
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = lengths * baseline.reps / point.throughput.reps
    value = point.length * baseline.value / point.throughput.value
    return Cost(point.load, point.depth, float(value), np.asarray(reps, dtype=float),
                (point.length,))


def _by_key(forced: Sequence[ForcedPoint], baselines: Mapping[int, Throughput]
            ) -> dict[Key, list[Cost]]:
    out: dict[Key, list[Cost]] = {}
    for p in sorted(forced, key=lambda p: (p.load, p.depth, p.length)):
        if p.load not in baselines:
            raise ValueError(f"forced point at load {p.load}, depth {p.depth}: no baseline "
                             "measured at that load")
        out.setdefault((p.load, p.depth), []).append(step_cost(p, baselines[p.load]))
    return out


def surface(forced: Sequence[ForcedPoint], baselines: Mapping[int, Throughput]
            ) -> dict[Key, Cost]:
    """c(B, k) at every (B, k) measured: the mean over its forced lengths (and of their
    replicates)."""
    out = {}
    for (b, k), costs in _by_key(forced, baselines).items():
        out[(b, k)] = Cost(b, k, float(np.mean([c.value for c in costs])),
                           np.mean([c.reps for c in costs], axis=0),
                           tuple(x for c in costs for x in c.lengths))
    return out


@dataclass(frozen=True)
class LengthCheck:
    """Two forced lengths at one (B, k): the cost at the longer minus that at the shorter."""

    load: int
    """B."""
    depth: int
    """k."""
    lengths: tuple[float, float]
    """The shortest and the longest forced length."""
    difference: float
    """c at the longest minus c at the shortest."""
    lo: float
    """The difference's interval, lower end (95 %, replicate by replicate)."""
    hi: float
    """... and upper end."""

    @property
    def agrees(self) -> bool:
        """The difference's interval holds 0: one cost, whatever is accepted."""
        return bool(self.lo <= 0.0 <= self.hi)


def length_checks(forced: Sequence[ForcedPoint], baselines: Mapping[int, Throughput]
                  ) -> list[LengthCheck]:
    """The shortest against the longest forced length at each (B, k) with two or more."""
    out = []
    for (b, k), costs in _by_key(forced, baselines).items():
        if len(costs) < 2:
            continue
        short, long_ = costs[0], costs[-1]
        lo, hi = interval(long_.reps - short.reps)
        out.append(LengthCheck(b, k, (short.lengths[0], long_.lengths[0]),
                               long_.value - short.value, lo, hi))
    return out


@dataclass(frozen=True)
class Decomposition:
    """One load's cost split by the line c = a + b k (module docstring)."""

    load: int
    """B."""
    fixed: float
    """a - 1: a speculative step's cost beyond a decode step's at any depth."""
    draft: float
    """b: the cost of one more depth (draft pass plus one more verified token)."""
    verify_excess: dict[int, float]
    """Depth -> the residual c(B, k) - (a + b k)."""
    fixed_interval: tuple[float, float] = (float("nan"), float("nan"))
    """`fixed` fitted in each replicate: its 95 % interval."""
    draft_interval: tuple[float, float] = (float("nan"), float("nan"))
    """`draft` likewise."""


def _line(ks: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares intercepts and slopes of c over k, one per row of `cs` (2-D)."""
    kc = ks - ks.mean()
    slope = (cs - cs.mean(axis=1, keepdims=True)) @ kc / (kc @ kc)
    return cs.mean(axis=1) - slope * ks.mean(), slope


def decompose(costs: Mapping[Key, Cost]) -> dict[int, Decomposition | None]:
    """Each load's decomposition (None with fewer than two depths)."""
    out: dict[int, Decomposition | None] = {}
    for b in sorted({key[0] for key in costs}):
        ks = sorted(k for load, k in costs if load == b)
        if len(ks) < 2:
            out[b] = None
            continue
        k_arr = np.array(ks, dtype=float)
        values = np.array([[costs[(b, k)].value for k in ks]])
        a, s = _line(k_arr, values)
        reps = np.stack([costs[(b, k)].reps for k in ks], axis=1)
        ok = np.all(np.isfinite(reps), axis=1)
        a_reps, s_reps = _line(k_arr, reps[ok])
        out[b] = Decomposition(
            b, float(a[0] - 1.0), float(s[0]),
            {k: float(values[0, i] - a[0] - s[0] * k) for i, k in enumerate(ks)},
            interval(a_reps - 1.0), interval(s_reps))
    return out


def leviathan_speedup(acceptance: float, depth: int, draft_cost: float) -> float:
    """(1 - a^{k+1}) / ((1 - a)(k c + 1)); at a = 1 its limit (k + 1) / (k c + 1)."""
    a, k, c = acceptance, depth, draft_cost
    tokens = k + 1.0 if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)
    return tokens / (k * c + 1.0)


def beside_leviathan(costs: Mapping[Key, Cost], parts: Decomposition, acceptance: float
                     ) -> list[dict[str, float]]:
    """At the decomposition's load (batch 1), for each depth measured: the i.i.d. accept
    length (1 - a^{k+1}) / (1 - a), the surface's speedup (that length / c(1, k)) and
    Leviathan's (draft cost c = `parts.draft`)."""
    out = []
    for k in sorted(k for b, k in costs if b == parts.load):
        length = leviathan_speedup(acceptance, k, 0.0)
        out.append({"depth": k, "accept_length": length,
                    "surface": length / costs[(parts.load, k)].value,
                    "leviathan": leviathan_speedup(acceptance, k, parts.draft)})
    return out


def forced_points(stats: CellStats, cells: pd.DataFrame, metric: str = "output_tok_s",
                  own: bool = False
                  ) -> dict[tuple[str, str], tuple[list[ForcedPoint], dict[int, Throughput]]]:
    """A run's forced points by (configuration, workload) with the baseline's throughput at
    each load (its own setup's: grid/analysis/setups.py): each honoured forced point at its
    measured decode length, paired replicates included (cells.py);
    with `own`, each unforced speculative point (the drafter's own acceptance) at its measured
    decode length instead: c = L T_b / T_v is the same step cost whatever set the length (at
    depth 0, speculation configured with no drafts, L = 1: c(B, 0) = T_b / T_0).
    Closed-loop points only, a point without a recorded depth or length left out."""
    curve = CurveCells.of(stats, cells)
    pts = [p for p in points(stats, (metric,)) if p.load_kind == "concurrency"]
    base = {(p.variant, p.workload, int(p.load)): p for p in pts if is_baseline(p.variant)}
    out: dict[tuple[str, str], tuple[list[ForcedPoint], dict[int, Throughput]]] = {}
    for p in pts:
        b = base.get((baseline_of(p.variant), p.workload, int(p.load)))
        if is_baseline(p.variant):
            continue
        taken = (not curve.is_forced(p) if own else
                 curve.is_forced(p) and not curve.not_honoured(p))
        depth = curve.depth(p.cell_ids)
        # k = 0 (speculation configured, no drafts): every step yields one token, exactly
        length = ((1.0, None) if own and depth == 0 else curve.length(p)) if taken else None
        if b is None or length is None or depth is None:
            continue
        forced, baselines = out.setdefault((configuration(p.variant), p.workload), ([], {}))
        forced.append(ForcedPoint(int(p.load), depth, length[0],
                                  Throughput(p.values[metric], p.replicates[metric]),
                                  length[1]))
        baselines[int(p.load)] = Throughput(b.values[metric], b.replicates[metric])
    return out


def _between(known: Sequence[tuple[float, Cost]], x: float, load: int, depth: int
             ) -> Cost | None:
    """The cost at coordinate x from the known (coordinate, cost) pairs (ascending): the one at
    x itself, else the line between its neighbours on either side; None outside their span."""
    for at, cost in known:
        if math.isclose(at, x):
            return cost
    below = [(at, c) for at, c in known if at < x]
    above = [(at, c) for at, c in known if at > x]
    if not below or not above:
        return None
    (x0, c0), (x1, c1) = below[-1], above[0]
    w = (x - x0) / (x1 - x0)
    return Cost(load, depth, (1 - w) * c0.value + w * c1.value, (1 - w) * c0.reps + w * c1.reps)


def interpolated(costs: Mapping[Key, Cost], loads: Sequence[int], depths: Sequence[int]
                 ) -> dict[Key, Cost]:
    """c(B, k) at every (B, k) of `loads` x `depths` inside the span measured (module
    docstring): a measured cost as it is; else linear in k between the depths measured at
    that load, then linear in log B between the loads with that depth. A (B, k) with no
    measured neighbour on one side (outside the span) is left out: nothing is extrapolated."""
    rows: dict[int, dict[int, Cost]] = {}
    for b in sorted({load for load, _ in costs}):
        known = [(float(k), costs[(b, k)]) for k in sorted(k for load, k in costs if load == b)]
        row = {k: _between(known, float(k), b, k) for k in depths}
        rows[b] = {k: c for k, c in row.items() if c is not None}
    out = {}
    for k in depths:
        known = [(math.log(b), rows[b][k]) for b in sorted(rows) if k in rows[b]]
        for b in loads:
            cost = _between(known, math.log(b), b, k)
            if cost is not None:
                out[(b, k)] = cost
    return out


def widened(costs: Mapping[Key, Cost], checks: Sequence[LengthCheck], seed: int = 0
            ) -> tuple[dict[Key, Cost], dict[int, float]]:
    """The surface with each load's intervals widened by what the length check nearest it (in
    log load) measured where that check says the cost depends on the accepted length: each
    replicate moved by up to ±|difference| / c at the check's (B, k) (relative, spread evenly
    over the replicates in a seeded order), so a prediction resting on a cost the forced length
    does not fix says so in its interval. (the costs, load -> the relative widening)."""
    bad = [c for c in checks if not c.agrees and (c.load, c.depth) in costs]
    if not bad:
        return dict(costs), {}
    checked = sorted({c.load for c in checks})
    rel: dict[int, float] = {}
    for b in sorted({load for load, _ in costs}):
        near = min(checked, key=lambda x: (abs(math.log(x / b)), x))
        found = [abs(c.difference) / costs[(c.load, c.depth)].value for c in bad if c.load == near]
        if found:
            rel[b] = max(found)
    out = dict(costs)
    rng = np.random.default_rng(seed)
    for (b, k), cost in costs.items():
        if b in rel:
            u = rng.permutation(np.linspace(-1.0, 1.0, len(cost.reps)))
            out[(b, k)] = Cost(b, k, cost.value, cost.reps * (1.0 + rel[b] * u), cost.lengths)
    return out, rel
