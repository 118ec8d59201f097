"""The surface search's answers as search.json holds them: the surface c(B, k) over the lattice
and depths (measured cells as they are, the rest interpolated: grid/analysis/surface/cost.py
`interpolated`), its decomposition per load, Leviathan's closed form beside it at the lowest
load, the length checks; and for each domain of a drafter's acceptance profile, the predicted
speedup and break-even accept length at every (B, k), the best depth per load and the schedule
in each engine's words (`Engine.depth_setting`: the run's engine, vLLM's per-batch table and
SGLang's adaptive file)."""

from __future__ import annotations

import dataclasses
import math
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import engines
from grid.analysis.bootstrap import interval
from grid.analysis.surface import (
    Cost,
    Prediction,
    Profile,
    Schedule,
    beside_leviathan,
    decompose,
    depth_plan,
    interpolated,
    predict,
)
from grid.analysis.verdict import judged
from grid.plan.cells import Cell
from grid.plan.search import with_settings
from grid.plan.specs import server_request
from grid.questions.speculation.answers import crossover_threshold, placed, single_depth
from grid.questions.speculation.read import Read

FORMS = ("vllm", "sglang")
"""Engines whose words for a schedule every prediction gives, besides the run's own."""
ASSUMED_ACCEPTANCE = 0.8
"""Leviathan's i.i.d. acceptance when no profile is known (the paper's running example)."""
Form = Callable[[Schedule], dict[str, Any] | None]


def _r(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if np.isfinite(x) else None


def _pair(lo_hi: tuple[float, float]) -> list[float | None]:
    return [_r(lo_hi[0]), _r(lo_hi[1])]


def engine_forms(template: Cell) -> dict[str, Form]:
    """Each engine's setting of a schedule for the variant `template` (its own cell): the
    run's engine first, then FORMS; a variant an engine refuses gives its one line."""
    names = [str(template.config["engine"]["name"])]
    names += [n for n in FORMS if n not in names]

    def form(name: str) -> Form:
        def setting(tiers: Schedule) -> dict[str, Any] | None:
            cell = with_settings(template, {"variant.speculative_depth": [list(t) for t in tiers]})
            try:
                found = engines.get(name).depth_setting(server_request(cell.config))
            except ValueError as e:
                return {"engine": name, "refused": str(e)}
            if found is None:
                return None
            return {"engine": found.engine, "flags": list(found.flags),
                    "command": " ".join(shlex.quote(f) for f in found.flags),
                    "files": dict(found.files), "tiers": [list(t) for t in found.tiers]}
        return setting
    return {name: form(name) for name in names}


def surface_json(read: Read, measured: Mapping[tuple[int, int], Cost], source: str,
                 others: Mapping[tuple[int, int], str], lattice: tuple[int, ...],
                 depths: tuple[int, ...], acceptance: float | None,
                 drafters: Mapping[int, str] | None = None) -> dict[str, Any]:
    """The surface (its fitted points `measured`, each from `source`: `own` or `forced`), its
    decomposition, Leviathan beside it, the length checks; and the points not fitted: the
    drafter's own cells' (`others`: (load, depth) -> `own` or `confirm`), then each other
    drafter's (`drafters`: rate index -> name; source `drafter`, at its measured length)."""
    full = interpolated(measured, lattice, depths)
    table = [{"load": b, "depth": k, "cost": _r(c.value), "interval": _pair(c.interval),
              "measured": (b, k) in measured,
              "source": source if (b, k) in measured else None}
             for (b, k), c in sorted(full.items())]
    own = read.own_costs
    points = [{"load": b, "depth": k, "cost": _r(own[(b, k)].value),
               "interval": _pair(own[(b, k)].interval), "source": where}
              for (b, k), where in sorted(others.items())]
    points += [{"load": b, "depth": k, "cost": _r(c.value), "interval": _pair(c.interval),
                "source": "drafter", "drafter": name, "length": _r(c.lengths[0])}
               for r, name in sorted((drafters or {}).items(), reverse=True)  # listed order
               for (b, k), c in sorted(read.rungs.get(r, {}).items())]
    parts = decompose(measured)
    decomposition = {str(b): None if d is None else {
        "fixed": _r(d.fixed), "fixed_interval": _pair(d.fixed_interval), "draft": _r(d.draft),
        "draft_interval": _pair(d.draft_interval),
        "verify_excess": {str(k): _r(v) for k, v in d.verify_excess.items()}}
        for b, d in parts.items()}
    low = min(parts) if parts else None
    lowest = None if low is None else parts[low]
    a = ASSUMED_ACCEPTANCE if acceptance is None else acceptance
    beside = ([] if lowest is None else
              [{**{k: _r(v) for k, v in row.items()}, "depth": int(row["depth"])}
               for row in beside_leviathan(measured, lowest, a)])
    checks = [{"load": c.load, "depth": c.depth, "lengths": [_r(x) for x in c.lengths],
               "difference": _r(c.difference), "interval": [_r(c.lo), _r(c.hi)],
               "agrees": c.agrees} for c in read.length_checks]
    return {"points_from": source, "table": table, "points": points,
            "decomposition": decomposition,
            "leviathan": {"load": low, "acceptance": a, "assumed": acceptance is None,
                          "rows": beside},
            "length_checks": checks}


def zero_speedups(costs: Mapping[tuple[int, int], Cost], lattice: tuple[int, ...]
                  ) -> dict[int, tuple[float, float, float]]:
    """Depth 0 (speculation configured, no drafts) against the baseline at every lattice load
    inside the span measured: 1 / c(B, 0), 95 % (c(B, 0) linear in log B between the loads
    measured, replicate by replicate)."""
    zero = {(b, k): c for (b, k), c in costs.items() if k == 0}
    out = {}
    for (b, _), c in sorted(interpolated(zero, lattice, (0,)).items()):
        with np.errstate(invalid="ignore", divide="ignore"):
            lo, hi = interval(1.0 / c.reps)
        out[b] = (1.0 / c.value, lo, hi)
    return out


def zero_json(costs: Mapping[tuple[int, int], Cost], lattice: tuple[int, ...],
              spread: float | None) -> list[dict[str, Any]]:
    """Depth 0 per lattice load: c(B, 0), whether measured there, its speedup over the
    baseline with the verdict (grid/analysis/verdict.py `judged`: on the interval widened by
    the stated spread between repeats; none stated, undetermined (within-run noise only))."""
    zero = {b: c for (b, k), c in costs.items() if k == 0}
    full = interpolated({(b, 0): c for b, c in zero.items()}, lattice, (0,))
    return [{"load": b, "cost": _r(full[(b, 0)].value), "interval": _pair(full[(b, 0)].interval),
             "measured": b in zero, "speedup": _r(s), "speedup_interval": [_r(lo), _r(hi)],
             "verdict": judged(s, lo, hi, spread)[0]}
            for b, (s, lo, hi) in zero_speedups(costs, lattice).items()]


def mean_acceptance(profile: Profile | None) -> float | None:
    """The i.i.d. acceptance Leviathan's form takes for a profile: the mean conditional rate
    of its first domain (None without a profile)."""
    if profile is None or not profile.domains:
        return None
    first = next(iter(profile.domains.values()))
    return float(np.mean(first.conditional)) if first.conditional else None


def with_spread(preds: Mapping[tuple[int, int], Prediction], spread: float | None, seed: int = 0
                ) -> dict[tuple[int, int], Prediction]:
    """The predictions with each replicate moved by one draw of what varies between runs (a
    ratio of two once-measured cells: relative sd `spread` x sqrt(2), normal, seeded), so the
    best depth, the depths not ruled out and the single depth decide on run-to-run noise too,
    as the verdicts do (grid/analysis/verdict.py `between_runs`); None: as they are."""
    if spread is None:
        return dict(preds)
    rng = np.random.default_rng(seed)
    return {key: dataclasses.replace(p, reps=p.reps + rng.normal(
                0.0, spread * math.sqrt(2.0) * p.speedup, len(p.reps)))
            for key, p in preds.items()}


def prediction_json(costs: Mapping[tuple[int, int], Cost], profile: Profile,
                    forms: Mapping[str, Form], depth: int, variant: str, workload: str,
                    spread: float | None, zero: Mapping[int, float] | None = None,
                    fit: Mapping[tuple[int, int], Cost] | None = None) -> dict[str, Any]:
    """Per domain of the profile: AL(k), the prediction at every (B, k) (speedup with its
    interval, break-even length, the drafter placed on it), the configured depth's crossover
    and threshold, the best depth per load with the depths not ruled out beside it
    (`plausible_depths`), the schedule, the best single depth (answers.py `single_depth`,
    `zero`: depth 0's speedup over the baseline by load, what it runs above its threshold)
    (`forms`: kept for the
    recommendation, which words the schedule it settles on); the threshold's verdicts, the
    best depth, the depths not ruled out and the single depth on intervals widened by `spread`
    (grid.search.repeat_spread, `with_spread`) where one is given; the cells' own intervals as
    the fit gives them. With `fit`
    (the surface before the length checks widened it), each cell also carries `fit_interval`,
    the interval the fit alone gives: what a confirming cell, measured at the drafter's own
    length, is compared with (confirm.py); with `spread`, `decided_on`, the interval the best
    depth and the single depth were chosen on (`with_spread`), which a re-choice reads."""
    out: dict[str, Any] = {"source": profile.source, "unit": profile.unit, "domains": {}}
    for name, dom in profile.domains.items():
        preds = predict(costs, dom)
        fitted = predict(fit, dom) if fit is not None else {}
        decide = with_spread(preds, spread)
        plan = depth_plan(decide)
        out["domains"][name] = {
            "samples": dom.samples,
            "accept_length": [_r(dom.accept_length(k)) for k in range(1, dom.positions + 1)],
            "cells": [{**p.as_json(), "accept_length": _r(p.accept_length),
                       "break_even": _r(p.break_even), "speedup": _r(p.speedup),
                       "interval": _pair(p.interval), "placed": placed(p),
                       **({"fit_interval": _pair(fitted[key].interval)} if key in fitted
                          else {}),
                       **({"decided_on": _pair(decide[key].interval)} if spread is not None
                          else {})}
                      for key, p in preds.items()],
            "crossover": crossover_threshold(preds, depth, variant, workload, spread),
            "best": plan["best"], "plausible_depths": plan["plausible_depths"],
            "schedule": plan["schedule"], "text": plan["text"],
            "single": single_depth({key: (p.speedup, *p.interval) for key, p in decide.items()},
                                   zero)}
    return out
