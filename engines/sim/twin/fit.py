"""Fitting a twin: least squares (scipy.optimize.least_squares, within each factor's bounds) on
log(predicted / measured) of every figure of every cell, its uncertainty by a seeded bootstrap
over the cells, and its honest error: leave-one-load-out prediction of the cells it was not
fitted on."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from engines.sim.twin.analytic import Prediction, Setup, predict
from engines.sim.twin.cells import Observed
from engines.sim.twin.params import Space

WEIGHTS = {"output_tok_s": 1.0, "ttft_p50_s": 0.5, "tpot_p50_s": 1.0, "accept_length": 1.0,
           "per_position": 1.0}
"""Residual weights: TTFT counts half, since the closed form is least exact there (a
speculative batch's arrivals drift apart, docs/twin.md)."""
MAX_NFEV = 100
"""Evaluations per least-squares run: a well-posed fit converges in ~20; one on too few cells
to separate every factor (a held-out fit on one load) would wander on its flat directions."""


def figures(pred: Prediction) -> dict[str, float]:
    out = {"output_tok_s": pred.output_tok_s, "ttft_p50_s": pred.ttft_p50_s,
           "tpot_p50_s": pred.tpot_p50_s}
    if pred.accept_length is not None:
        out["accept_length"] = pred.accept_length
    return out


def residuals(setup: Setup, observed: Sequence[Observed]) -> list[float]:
    out: list[float] = []
    for o in observed:
        pred = predict(setup, o.scenario)
        got = figures(pred)
        for metric, value in o.measured.items():
            out.append(WEIGHTS[metric] * math.log(got[metric] / value))
        if o.per_position and pred.acceptance_per_position:
            for m, p in zip(o.per_position, pred.acceptance_per_position, strict=False):
                out.append(WEIGHTS["per_position"] * math.log(max(p, 1e-6) / max(m, 1e-6)))
    return out


@dataclass(frozen=True)
class Fit:
    x: tuple[float, ...]
    cost: float
    """Half the sum of squared residuals at ``x``."""
    setup: Setup


def fit(space: Space, observed: Sequence[Observed],
        starts: Sequence[Sequence[float]] | None = None) -> Fit:
    """The least-squares fit from each start (default: the starting setup and the middle of
    every factor's range, so a start far from the truth is not the only one), the best kept."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    lo = [f.bounds[0] for f in space.factors]
    hi = [f.bounds[1] for f in space.factors]
    if starts is None:
        starts = [space.x0(), [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]]

    def fun(x: Sequence[float]) -> list[float]:
        return residuals(space.setup(x), observed)

    best: Fit | None = None
    for x0 in starts:
        x0 = [min(max(v, a + 1e-9), b - 1e-9) for v, a, b in zip(x0, lo, hi, strict=True)]
        sol = least_squares(fun, x0, bounds=(lo, hi), x_scale="jac", xtol=1e-10, ftol=1e-10,
                            gtol=1e-10, max_nfev=MAX_NFEV)
        if best is None or sol.cost < best.cost:
            best = Fit(tuple(float(v) for v in sol.x), float(sol.cost), space.setup(sol.x))
    assert best is not None
    return best


def log_errors(setup: Setup, observed: Sequence[Observed]
               ) -> list[tuple[dict[str, float], tuple[float, ...]]]:
    """Per cell: log(measured / predicted) of each figure, and of each position's share."""
    out = []
    for o in observed:
        pred = predict(setup, o.scenario)
        got = figures(pred)
        errs = {m: math.log(v / got[m]) for m, v in o.measured.items()}
        pos: tuple[float, ...] = ()
        if o.per_position and pred.acceptance_per_position:
            pos = tuple(math.log(max(m, 1e-6) / max(p, 1e-6)) for m, p in
                        zip(o.per_position, pred.acceptance_per_position, strict=False))
        out.append((errs, pos))
    return out


def bootstrap(space: Space, observed: Sequence[Observed], best: Fit, replicates: int,
              seed: int) -> list[dict[str, float]]:
    """Each factor's value in ``replicates`` refits (seeded) to the cells as the fit predicts
    them times a log error drawn, for each cell and figure, from the fit's errors of that
    figure over all cells (rescaled by sqrt(m / (m - p)) for the p factors fitted to m
    figures). The cells' design -- which loads and variants were measured -- stays, so every
    replicate can fit every factor; each refit starts from the full fit."""
    errors = log_errors(best.setup, observed)
    pools: dict[str, list[float]] = {}
    for errs, pos in errors:
        for metric, e in errs.items():
            pools.setdefault(metric, []).append(e)
        pools.setdefault("per_position", []).extend(pos)
    m = sum(len(v) for v in pools.values())
    inflate = math.sqrt(m / max(1, m - len(space.factors)))
    rng = random.Random(seed)
    preds = [predict(best.setup, o.scenario) for o in observed]
    out = []
    for _ in range(replicates):
        draw = []
        for o, pred in zip(observed, preds, strict=True):
            got = figures(pred)
            measured = {k: got[k] * math.exp(inflate * rng.choice(pools[k]))
                        for k in o.measured}
            shares = None
            if o.per_position and pred.acceptance_per_position:
                shares = tuple(p * math.exp(inflate * rng.choice(pools["per_position"]))
                               for p in pred.acceptance_per_position[:len(o.per_position)])
            draw.append(replace(o, measured=measured, per_position=shares))
        again = fit(space, draw, starts=[list(best.x)])
        out.append(space.values(again.x))
    return out


def factor_table(space: Space, best: Fit, replicates: Sequence[Mapping[str, float]],
                 level: float = 0.95) -> dict[str, dict[str, float | list[float]]]:
    """Per factor: its fitted value, its interval at ``level`` and its bounds. The interval is
    the bootstrap's normal one on the scale the factor is fitted on (log for the efficiency
    factors): the fitted value +- t(level, R - 1) x the replicates' standard deviation,
    clipped to the bounds. With a few replicates this is steadier than their percentiles,
    which at R = 20 are nearly their extremes (an ~90 % interval, not 95 %)."""
    from scipy.stats import t as student  # type: ignore[import-untyped]

    values = space.values(best.x)
    r = len(replicates)
    q = float(student.ppf((1 + level) / 2, r - 1)) if r >= 2 else 0.0
    out: dict[str, dict[str, float | list[float]]] = {}
    for f in space.factors:
        v = values[f.name]
        enc = [f.encode(rep[f.name]) for rep in replicates]
        sd = statistics.stdev(enc) if r >= 2 else 0.0
        centre = f.encode(v)
        lo, hi = f.bounds
        out[f.name] = {"value": v, "lo": f.decode(max(lo, centre - q * sd)),
                       "hi": f.decode(min(hi, centre + q * sd)), "bounds": [f.lo, f.hi]}
    return out
