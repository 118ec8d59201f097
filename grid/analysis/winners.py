"""Which threshold variant won: when threshold variants (`speculative_disable_above_batch`,
labelled by grid/plan/cells.py as `__off_above-N`) were swept, per workload and load level the
winner by each metric and its margin over the runner-up with the interval of the ratio of
their replicates, and overall the variant with the best mean of metric / level mean; each
winner with how often it is the best of all the options over the bootstrap (`win_share`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from grid.analysis.bootstrap import excludes_zero, interval
from grid.analysis.points import Point
from grid.analysis.setups import split

NO_DIFFERENCE = "no significant difference"
THRESHOLD_LABEL = re.compile(r"__off_above-(\d+)")
"""How grid/plan/cells.py labels a variant with speculative_disable_above_batch=N."""


def win_share(replicates: Mapping[str, np.ndarray], winner: str) -> float:
    """How often `winner` is the best over the bootstrap: the share of replicates (those
    finite for every option) in which its replicate is above every other option's (a tie is
    no win). Choosing the best by point estimate and testing it against the runner-up alone
    overstates it (the winner's curse); this share is over all the options at once. NaN
    without a finite replicate."""
    names = list(replicates)
    table = np.stack([np.asarray(replicates[n], dtype=float) for n in names])
    table = table[:, np.isfinite(table).all(axis=0)]
    if not table.shape[1]:
        return math.nan
    mine = names.index(winner)
    return float(np.mean(table[mine] > np.delete(table, mine, axis=0).max(axis=0)))


def best_share(share: float | None) -> str:
    """` (the best in 87 % of bootstrap replicates)`; empty without a share."""
    if share is None or not math.isfinite(share):
        return ""
    return f" (the best in {100 * share:.0f} % of bootstrap replicates)"


def _margin(a: np.ndarray, b: np.ndarray, a_point: float, b_point: float) -> dict:
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = a / b - 1.0
    lo, hi = interval(reps)
    return {"margin": a_point / b_point - 1.0 if b_point else math.nan, "lo": lo, "hi": hi,
            "significant": excludes_zero(lo, hi)}


def threshold_winners(pts: list[Point], metrics: tuple[str, ...] = ("output_tok_s",
                                                                     "goodput_tok_s")) -> dict:
    """When threshold variants were swept: per workload and load level, which variant won (by
    each metric) and by how much over the runner-up; overall, the variant with the best mean
    of metric / level mean across the levels every variant was measured at."""
    per_load, overall = [], []
    groups = {(split(p.variant)[0], p.workload) for p in pts
              if THRESHOLD_LABEL.search(p.variant)}
    for setup, workload in sorted(groups):
        mine = [p for p in pts if p.workload == workload and split(p.variant)[0] == setup]
        levels = sorted({(p.load_kind, p.load) for p in mine})
        variants = sorted({p.variant for p in mine})
        for metric in metrics:
            scores: dict[str, list[np.ndarray]] = {v: [] for v in variants}
            points_: dict[str, list[float]] = {v: [] for v in variants}
            for kind, load in levels:
                here = sorted((p for p in mine if (p.load_kind, p.load) == (kind, load)),
                              key=lambda p: -p.values[metric])
                if len(here) < 2:
                    continue
                win, second = here[0], here[1]
                m = _margin(win.replicates[metric], second.replicates[metric],
                            win.values[metric], second.values[metric])
                m["wins_share"] = win_share({p.variant: p.replicates[metric] for p in here},
                                            win.variant)
                per_load.append({"workload": workload, "metric": metric, "load_kind": kind,
                                 "load": load, "winner": win.variant, "value": win.values[metric],
                                 "runner_up": second.variant, **m,
                                 "verdict": "winner" if m["significant"] else NO_DIFFERENCE})
                if len(here) == len(variants):
                    norm = float(np.mean([p.values[metric] for p in here])) or 1.0
                    for p in here:
                        scores[p.variant].append(p.replicates[metric] / norm)
                        points_[p.variant].append(p.values[metric] / norm)
            ranked = sorted((v for v in variants if points_[v]),
                            key=lambda v: -float(np.mean(points_[v])))
            if len(ranked) >= 2:
                a, b = ranked[0], ranked[1]
                m = _margin(np.mean(scores[a], axis=0), np.mean(scores[b], axis=0),
                            float(np.mean(points_[a])), float(np.mean(points_[b])))
                m["wins_share"] = win_share({v: np.mean(scores[v], axis=0) for v in ranked}, a)
                overall.append({"workload": workload, "metric": metric, "winner": a,
                                "runner_up": b, "levels": len(points_[a]), **m,
                                "verdict": "winner" if m["significant"] else NO_DIFFERENCE})
    return {"per_load": per_load, "overall": overall}
