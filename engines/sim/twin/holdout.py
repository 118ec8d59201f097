"""A twin's honest error: leave one load out, fit on the other loads' cells, predict the
held-out ones (their output tok/s, TTFT p50, TPOT p50, accept length and, where a load has a
baseline and a speculative cell of the same workload, the speedup), and summarise each
metric's error with a seeded bootstrap interval. A held-out load outside the range the rest
covers (the lowest or the highest) is extrapolation, and marked so."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engines.sim.twin.analytic import Prediction, predict
from engines.sim.twin.cells import Observed
from engines.sim.twin.fit import figures, fit
from engines.sim.twin.params import Space

HOLDOUT_METRICS = ("output_tok_s", "ttft_p50_s", "tpot_p50_s", "accept_length", "speedup")


def error_pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured


def _pair_key(o: Observed) -> tuple[str, int, int]:
    """A speculative cell's baseline: the same workload, load and output length."""
    return o.cell.workload, o.load, round(o.scenario.output_tokens)


def rows(observed: Sequence[Observed], preds: Sequence[Prediction], baseline: str,
         extrapolation: bool = False) -> list[dict[str, Any]]:
    """Per cell and metric: measured, predicted, error %; plus each speculative cell's speedup
    over the baseline cell of the same workload, load and output length."""
    out = []
    for o, p in zip(observed, preds, strict=True):
        got = figures(p)
        for metric, value in o.measured.items():
            out.append({"cell_id": o.cell.cell_id, "variant": o.cell.variant,
                        "workload": o.cell.workload, "concurrency": o.load, "metric": metric,
                        "measured": value, "predicted": got[metric],
                        "error_pct": error_pct(got[metric], value),
                        "extrapolation": extrapolation})
    base = {_pair_key(o): (o, p) for o, p in zip(observed, preds, strict=True)
            if o.cell.variant == baseline}
    for o, p in zip(observed, preds, strict=True):
        pair = base.get(_pair_key(o))
        if o.cell.variant == baseline or pair is None:
            continue
        bo, bp = pair
        if "output_tok_s" not in o.measured or "output_tok_s" not in bo.measured:
            continue
        measured = o.measured["output_tok_s"] / bo.measured["output_tok_s"]
        predicted = p.output_tok_s / bp.output_tok_s
        out.append({"cell_id": o.cell.cell_id, "variant": o.cell.variant,
                    "workload": o.cell.workload, "concurrency": o.load, "metric": "speedup",
                    "measured": measured, "predicted": predicted,
                    "error_pct": error_pct(predicted, measured), "extrapolation": extrapolation})
    return out


def summary(errors: Sequence[dict[str, Any]], seed: int, draws: int = 2000
            ) -> dict[str, dict[str, Any]]:
    """Per metric: n, mean absolute error % with its bootstrap 95 % interval over the
    held-out cells (seeded), the largest absolute error and the mean signed error (bias)."""
    rng = random.Random(seed)
    out: dict[str, dict[str, Any]] = {}
    for metric in HOLDOUT_METRICS:
        errs = [abs(r["error_pct"]) for r in errors if r["metric"] == metric]
        if not errs:
            continue
        signed = [r["error_pct"] for r in errors if r["metric"] == metric]
        means = [sum(rng.choice(errs) for _ in errs) / len(errs) for _ in range(draws)]
        lo, hi = (float(v) for v in np.percentile(means, [2.5, 97.5]))
        out[metric] = {"n": len(errs), "mae_pct": sum(errs) / len(errs), "lo": lo, "hi": hi,
                       "max_pct": max(errs), "bias_pct": sum(signed) / len(signed)}
    return out


def leave_one_load_out(space: Space, observed: Sequence[Observed], baseline: str,
                       seed: int) -> dict[str, Any]:
    """Every load held out in turn (module docstring): the per-cell errors and the summary,
    over all held-out cells and over those inside the range the others cover."""
    loads = sorted({o.load for o in observed})
    errors: list[dict[str, Any]] = []
    for load in loads:
        train = [o for o in observed if o.load != load]
        test = [o for o in observed if o.load == load]
        if not train:
            continue
        setup = fit(space, train, starts=[space.x0()]).setup
        outside = not min(o.load for o in train) <= load <= max(o.load for o in train)
        errors += rows(test, [predict(setup, o.scenario) for o in test], baseline, outside)
    inside = [r for r in errors if not r["extrapolation"]]
    return {"loads": loads, "metrics": summary(errors, seed),
            "metrics_inside": summary(inside, seed), "cells": errors}


def split(space: Space, observed: Sequence[Observed], baseline: str, held: Sequence[int],
          seed: int, workloads: Sequence[str] = ()) -> dict[str, Any]:
    """A user-chosen split: fit on every cell but those at the loads ``held`` or of the
    ``workloads`` (e.g. one output length), predict those. A held-out group (one load of one
    workload) is extrapolation when its load, output length or prompt length lies outside what
    the fitted cells cover. ValueError when a held load or workload was not measured or fewer
    than two loads are left to fit on."""
    loads = sorted({o.load for o in observed})
    missing = sorted(set(held) - set(loads))
    if missing:
        raise ValueError(f"--holdout {','.join(map(str, held))}: no cells at load "
                         f"{','.join(map(str, missing))} (measured: "
                         f"{','.join(map(str, loads))})")
    names = sorted({o.cell.workload for o in observed})
    unknown = sorted(set(workloads) - set(names))
    if unknown:
        raise ValueError(f"--holdout-workloads: no cells of {', '.join(unknown)} (the run's: "
                         f"{', '.join(names)})")

    def is_held(o: Observed) -> bool:
        return o.load in held or o.cell.workload in workloads

    train = [o for o in observed if not is_held(o)]
    fitted = sorted({o.load for o in train})
    if len(fitted) < 2:
        what = ",".join(map(str, held)) or ",".join(workloads)
        raise ValueError(f"holding out {what} leaves {len(fitted)} load(s) to fit on; a twin "
                         "needs two or more")
    setup = fit(space, train).setup

    def span(values: Sequence[float]) -> tuple[float, float]:
        return min(values), max(values)

    covered = [span([o.load for o in train]),
               span([o.scenario.output_tokens for o in train]),
               span([o.scenario.prompt_tokens for o in train])]
    groups: dict[tuple[int, str], list[Observed]] = {}
    for o in observed:
        if is_held(o):
            groups.setdefault((o.load, o.cell.workload), []).append(o)
    errors: list[dict[str, Any]] = []
    for _, test in sorted(groups.items()):
        o = test[0]
        values = (o.load, o.scenario.output_tokens, o.scenario.prompt_tokens)
        outside = any(not lo - 1e-9 <= v <= hi + 1e-9
                      for v, (lo, hi) in zip(values, covered, strict=True))
        errors += rows(test, [predict(setup, t.scenario) for t in test], baseline, outside)
    return {"held_out": sorted(set(held)), "held_out_workloads": sorted(set(workloads)),
            "fitted_on": fitted,
            "fitted_workloads": sorted({o.cell.workload for o in train}),
            "metrics": summary(errors, seed), "cells": errors}


SPREAD_METRICS = ("output_tok_s", "ttft_p50_s", "tpot_p50_s")


def repeat_spread(observed: Sequence[Observed]) -> dict[str, dict[str, Any]]:
    """How far the same cell measured again lands (cells equal but for their repeat index):
    per metric, the relative range (max - min) / mean of each repeated cell, in %, its mean
    and largest over the repeated cells. A twin's held-out error cannot be expected below it:
    the measurement itself moves that much."""
    groups: dict[tuple[str, str, int, int], list[Observed]] = {}
    for o in observed:
        key = (o.cell.variant, o.cell.workload, o.load, round(o.scenario.output_tokens))
        groups.setdefault(key, []).append(o)
    out: dict[str, dict[str, Any]] = {}
    for metric in SPREAD_METRICS:
        spreads = []
        for group in groups.values():
            values = [o.measured[metric] for o in group if metric in o.measured]
            if len({o.cell.repeat for o in group}) > 1 and len(values) > 1:
                spreads.append(100.0 * (max(values) - min(values))
                               / (sum(values) / len(values)))
        if spreads:
            out[metric] = {"n": len(spreads), "mean_pct": sum(spreads) / len(spreads),
                           "max_pct": max(spreads)}
    return out


GOAL_PCT = 10.0
"""The twin's goal on a real engine: held-out mean |error| no larger than this or the
repeat spread, whichever is larger."""


def goal(metrics: Mapping[str, Mapping[str, Any]], spread: Mapping[str, Mapping[str, Any]],
         metric: str = "output_tok_s") -> dict[str, Any] | None:
    """The held-out mean |error| of `metric` against max(GOAL_PCT, its mean repeat spread);
    None without a held-out error or a repeat spread for it."""
    if metric not in metrics or metric not in spread:
        return None
    bound = max(GOAL_PCT, spread[metric]["mean_pct"])
    error = metrics[metric]["mae_pct"]
    return {"metric": metric, "error_pct": float(error),
            "spread_pct": float(spread[metric]["mean_pct"]),
            "bound_pct": bound, "met": bool(error <= bound)}
