"""Points: a variant at one load level of one workload, over its repeats (the `repeat` axis).
The point is the mean over repeats; its bootstrap replicates carry the spread between repeats as
well as the requests within each (grid/analysis/repeats.py: the between-repeat noise pooled
over the run, Student's t). What the intervals then cover is summarised once per run: the most
repeats of a point, the pooled noise, and each point whose repeats' own intervals do not
overlap."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import interval
from grid.analysis.cellstats import CellStats, repeat_of
from grid.analysis.jsonsafe import json_safe
from grid.analysis.repeats import (
    NO_NOISE,
    RepeatMethod,
    RepeatNoise,
    by_variant,
    combine,
    disagree,
    pooled,
)

REPEAT_OVERRIDE = "grid.axes.repeat=[0,1,2]"
"""The override that measures every cell three times."""


def fmt_load(kind: str, load: float) -> str:
    return f"c={load:g}" if kind == "concurrency" else f"{load:g}/s"


@dataclass
class Point:
    """One variant at one load level of one workload, over its repeats."""

    variant: str
    workload: str
    load_kind: str
    """`concurrency` (closed loop) or `rate` (open loop)."""
    load: float
    values: dict[str, float]
    replicates: dict[str, np.ndarray]
    repeats: int = 1
    cell_ids: list[str] = field(default_factory=list)
    """The cells (one per repeat) the point averages."""
    over_saturated: bool = False
    """A cell of the point was stopped over-saturated (its load outran the server: its numbers
    are no steady state, specgrid_metrics/saturation.py)."""
    by_repeat: dict[str, dict[int, float]] = field(default_factory=dict)
    """Metric -> repeat index -> that repeat's value."""
    disagrees: dict[str, bool] = field(default_factory=dict)
    """Metric -> the repeats' own intervals do not overlap (grid/analysis/repeats.py)."""


def _groups(stats: CellStats) -> list[pd.DataFrame]:
    table = stats.table
    if table.empty or "output_tok_s" not in table:
        return []
    done = table[(table.status == "done") & table.output_tok_s.notna()]
    return [g for _, g in done.groupby(["variant", "workload", "concurrency", "rate"],
                                       dropna=False, sort=True)]


def _noise(groups: list[pd.DataFrame], metric: str) -> dict[str, RepeatNoise]:
    """Each variant's between-repeat noise of `metric` (grid/analysis/repeats.py `by_variant`)."""
    values: dict[str, list[np.ndarray]] = {}
    for g in groups:
        values.setdefault(str(g.variant.iloc[0]), []).append(g[metric].to_numpy(dtype=float))
    return by_variant(values)


def points(stats: CellStats, metrics: tuple[str, ...] = ("output_tok_s", "goodput_tok_s"),
           repeats: RepeatMethod = "pooled_t") -> list[Point]:
    """Done cells with rows, grouped over repeats into points (`repeats`: how the repeats'
    replicates combine, grid/analysis/repeats.py)."""
    groups = _groups(stats)
    noise = {m: _noise(groups, m) if repeats == "pooled_t" else {} for m in metrics}
    out = []
    for group in groups:
        first = group.iloc[0]
        closed = pd.isna(first.rate)
        load = float(first.concurrency if closed else first.rate)
        key = f"{first.variant}|{first.workload}|{first.concurrency}|{first.rate}"
        index = [repeat_of(row) for _, row in group.iterrows()]
        values, reps, by_repeat, disagrees = {}, {}, {}, {}
        for metric in metrics:
            measured = group[metric].to_numpy(dtype=float)
            own = [stats.replicates[c][metric] for c in group.cell_id]
            values[metric] = float(measured.mean())
            reps[metric] = combine(measured, own, repeats,
                                   noise[metric].get(str(first.variant), NO_NOISE),
                                   f"{key}|{metric}")
            by_repeat[metric] = dict(zip(index, (float(v) for v in measured), strict=True))
            disagrees[metric] = disagree([interval(r) for r in own])
        saturated = "stop_reason" in group and bool((group.stop_reason == "over_saturated").any())
        out.append(Point(str(first.variant), str(first.workload),
                         "concurrency" if closed else "rate", load, values, reps,
                         len(group), [str(c) for c in group.cell_id], saturated, by_repeat,
                         disagrees))
    return out


def repeat_ratios(p: Point, b: Point, metric: str) -> list[float]:
    """p over b - 1 in each repeat both measured (repeat r against repeat r)."""
    mine, theirs = p.by_repeat.get(metric, {}), b.by_repeat.get(metric, {})
    with np.errstate(invalid="ignore", divide="ignore"):
        return [float(np.float64(mine[r]) / theirs[r] - 1.0) for r in sorted(mine)
                if r in theirs]


def repeats_summary(pts: list[Point], metric: str = "output_tok_s") -> dict:
    """What the intervals cover: `most` repeats of any point, the pooled between-repeat
    standard deviation (relative) and its degrees of freedom, each variant whose repeats spread
    more than the others' (its own, grid/analysis/repeats.py `by_variant`), and each point whose
    repeats' own intervals do not overlap, with its per-repeat values."""
    noise = pooled([list(p.by_repeat.get(metric, {}).values()) for p in pts])
    values: dict[str, list[list[float]]] = {}
    for p in pts:
        values.setdefault(p.variant, []).append(list(p.by_repeat.get(metric, {}).values()))
    own = {v: n for v, n in by_variant(values).items() if n.dof < noise.dof}  # its own pool
    return json_safe({
        "most": max((p.repeats for p in pts), default=0),
        "pooled_sd": noise.sd if noise.dof else None, "dof": noise.dof,
        "own_noise": [{"variant": v, "sd": n.sd, "dof": n.dof} for v, n in own.items()],
        "disagreeing": [{"variant": p.variant, "workload": p.workload,
                         "load_kind": p.load_kind, "load": p.load,
                         "by_repeat": {str(r): v for r, v in p.by_repeat[metric].items()}}
                        for p in pts if p.disagrees.get(metric)]})


def repeat_lines(summary: dict) -> list[str]:
    """One line on what the intervals cover; one naming each variant with its own noise and
    each point whose repeats disagree."""
    if summary["most"] < 2:
        return [f"intervals cover within-run noise only (one repeat per cell); to cover what "
                f"varies from run to run, add repeats: {REPEAT_OVERRIDE}"]
    out = [f"intervals cover the spread between repeats (up to {summary['most']} per cell; "
           f"between-repeat sd {100 * (summary['pooled_sd'] or 0):.1f} %, pooled, "
           f"{summary['dof']} degrees of freedom)"]
    for o in summary.get("own_noise", []):
        out.append(f"{o['variant']}'s repeats spread more than the other variants': its own "
                   f"between-repeat sd {100 * o['sd']:.1f} % ({o['dof']} degrees of freedom)")
    for d in summary["disagreeing"]:
        values = ", ".join(f"{v:.4g}" for v in d["by_repeat"].values())
        out.append(f"repeats disagree beyond their own intervals: {d['variant']} on "
                   f"{d['workload']} at {fmt_load(d['load_kind'], d['load'])}: {values} tok/s")
    return out
