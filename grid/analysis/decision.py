"""From analysed cells to decisions: the speedup of each variant over the baseline against load
(with intervals and verdicts, grid/analysis/verdict.py), the crossover load where speculation
stops paying (with its interval), the recommended `speculative_disable_above_batch`, and — when
threshold variants were swept — which one won at each load and overall. A variant is compared
only with the baseline of its own setup (grid/analysis/setups.py); repeats of a cell are
combined by grid/analysis/repeats.py. What each part means: docs/report.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import LEVEL, interval
from grid.analysis.cellstats import CellStats
from grid.analysis.jsonsafe import json_safe
from grid.analysis.points import (
    Point,
    fmt_load,
    points,
    repeat_lines,
    repeat_ratios,
    repeats_summary,
)
from grid.analysis.setups import SEP, axis_values, is_baseline, split, varying
from grid.analysis.verdict import (
    FASTER,
    RULE,
    UNDETERMINED,
    cost_text,
    half_width,
    holm,
    p_value,
    recommend_threshold,
    repeats_to_resolve,
    verdict_of,
)
from grid.analysis.winners import (
    NO_DIFFERENCE,
    THRESHOLD_LABEL,
    best_share,
    threshold_winners,
)
from specgrid_metrics.crossover import crossover_of


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}%" if math.isfinite(x) else "?"


def _compare(p: Point, b: Point, metric: str) -> dict:
    """p over b: the point ratio - 1, its interval from the replicates, the verdict, and the
    range of the per-repeat ratios (NaN with fewer than two repeats in common)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = p.replicates[metric] / b.replicates[metric] - 1.0
        point = float(np.float64(p.values[metric]) / b.values[metric] - 1.0)
    per_repeat = repeat_ratios(p, b, metric)
    spread = (min(per_repeat), max(per_repeat)) if len(per_repeat) >= 2 else (math.nan, math.nan)
    lo, hi = interval(reps)
    verdict = verdict_of(lo, hi)
    if b.values[metric] == 0 and p.values[metric] > 0:  # e.g. no baseline goodput at all
        verdict = FASTER
    repeats = min(p.repeats, b.repeats)
    half = half_width(lo, hi)
    return {"workload": p.workload, "load_kind": p.load_kind, "load": p.load, "metric": metric,
            "speedup": point, "lo": lo, "hi": hi, "verdict": verdict, "half_width": half,
            "p": p_value(reps), "dropped": int(np.size(reps) - np.isfinite(reps).sum()),
            "repeats_needed": (repeats_to_resolve(half, point, repeats)
                               if verdict == UNDETERMINED else None),
            "repeats": repeats, "repeat_lo": spread[0],
            "repeat_hi": spread[1], "_reps": reps}


def speedups(pts: list[Point], baseline: str = "baseline", metric: str = "output_tok_s"
             ) -> pd.DataFrame:
    """Relative speedup (variant / baseline - 1) of every other variant at every load level
    its own setup's baseline was measured at, with its interval and verdict."""
    base = {(split(p.variant)[0], p.workload, p.load_kind, p.load): p for p in pts
            if is_baseline(p.variant, baseline)}
    rows = []
    for p in pts:
        b = base.get((split(p.variant)[0], p.workload, p.load_kind, p.load))
        if is_baseline(p.variant, baseline) or b is None:
            continue
        rows.append({"variant": p.variant, "baseline": b.variant, **_compare(p, b, metric)})
    table = pd.DataFrame(rows)
    if len(table):  # the family the run's significance list is controlled over
        table["holm"] = holm(table.p.tolist())
    return table


def setup_comparisons(pts: list[Point], axes: list[str], baseline: str = "baseline",
                      metric: str = "output_tok_s") -> pd.DataFrame:
    """The setups compared baseline to baseline: for each varying axis (engine, model,
    hardware), each value's baseline over the first value's, where the other axes, the
    workload and the load are the same."""
    rows = []
    bases = [p for p in pts if is_baseline(p.variant, baseline)]
    for axis in axes:
        groups: dict[tuple, dict[str, Point]] = {}
        for p in bases:
            values = axis_values(split(p.variant)[0], axes)
            if axis not in values:
                continue
            rest = SEP.join(v for a, v in values.items() if a != axis)
            groups.setdefault((rest, p.workload, p.load_kind, p.load), {})[values[axis]] = p
        for (rest, *_), by_value in groups.items():
            ordered = sorted(by_value)
            for value in ordered[1:]:
                rows.append({"axis": axis, "value": value, "reference": ordered[0],
                             "same": rest, "variant": by_value[value].variant,
                             "baseline": by_value[ordered[0]].variant,
                             **_compare(by_value[value], by_value[ordered[0]], metric)})
    return pd.DataFrame(rows)


@dataclass
class Crossover:
    variant: str
    workload: str
    load_kind: str
    loads: list[float]
    point: float
    lo: float
    hi: float
    assumed: tuple[float, float] | None = None
    """A simulated curve's crossover over its model's assumptions (grid/report/assumed.py):
    then the interval above is the cells' sampling noise only, and says so."""

    def describe(self) -> str:
        kind = "concurrency" if self.load_kind == "concurrency" else "rate"
        def one(x: float) -> str:
            if x == math.inf:
                return f"above {max(self.loads):g}"
            if x == -math.inf:
                return f"below {min(self.loads):g}"
            return f"{x:.1f}"
        if self.point == math.inf:
            head = f"no crossover: pays at every tested {kind} up to {max(self.loads):g}"
        elif self.point == -math.inf:
            head = f"no crossover: does not pay even at {kind} {min(self.loads):g}"
        else:
            head = f"crossover at {kind} {self.point:.1f}"
        if self.assumed is not None:
            return (f"{head} (95% interval {one(self.lo)} .. {one(self.hi)}: the simulated "
                    f"cells' sampling noise only; the model's assumptions that meet its anchor "
                    f"put it at {self.assumed[0]:.2f}-{self.assumed[1]:.2f})")
        return f"{head} (95% interval {one(self.lo)} .. {one(self.hi)})"


def crossovers(table: pd.DataFrame) -> list[Crossover]:
    """One crossover per (variant, workload, load kind) with at least two load levels."""
    out: list[Crossover] = []
    if table.empty:
        return out
    for (variant, workload, kind), group in table.groupby(["variant", "workload", "load_kind"]):
        group = group.sort_values("load")
        if len(group) < 2:
            continue
        loads = group.load.to_numpy(dtype=float)
        point = crossover_of(loads, group.speedup.to_numpy(dtype=float))
        reps = np.stack(list(group._reps), axis=1)  # (replicates, levels)
        values = np.array([crossover_of(loads, r) for r in reps])
        values = values[~np.isnan(values)]  # a replicate with a non-finite level, as interval()
        tail = (1 - LEVEL) / 2 * 100
        lo, hi = ((float(v) for v in np.percentile(values, [tail, 100 - tail],
                                                    method="inverted_cdf"))
                  if len(values) else (math.nan, math.nan))
        out.append(Crossover(str(variant), str(workload), str(kind), list(loads), point, lo, hi))
    return out


def _level_parts(group: pd.DataFrame) -> str:
    parts = []
    for row in group.sort_values(["load_kind", "load"]).to_dict("records"):
        tag = "" if row["verdict"] != UNDETERMINED else f" {UNDETERMINED}"
        if row.get("dropped", 0) and pd.notna(row.get("dropped")):
            tag += f" ({int(row['dropped'])} replicates not finite, left out)"
        lo, hi = row.get("repeat_lo", math.nan), row.get("repeat_hi", math.nan)
        if pd.notna(lo) and pd.notna(hi):
            tag += f" (repeats {_pct(lo)}..{_pct(hi)})"
        parts.append(f"{fmt_load(row['load_kind'], row['load'])} {_pct(row['speedup'])} "
                     f"[{_pct(row['lo'])}, {_pct(row['hi'])}]{tag}")
    return ", ".join(parts)


def speedup_lines(table: pd.DataFrame) -> list[str]:
    """One line per variant and workload: the speedup over its own setup's baseline at each
    load with its interval (`vllm · llama3.1-8b · eagle3 vs baseline on coding: c=1 ...`)."""
    lines: list[str] = []
    if table.empty:
        return lines
    for (variant, baseline, workload), group in table.groupby(
            ["variant", "baseline", "workload"], sort=True):
        lines.append(f"{variant} vs {split(str(baseline))[1]} on {workload}: {_level_parts(group)}")
    return lines


def setup_lines(table: pd.DataFrame) -> list[str]:
    """One line per compared pair of setups and workload (`engine vllm vs sglang (llama3.1-8b),
    baseline to baseline on coding: c=1 +57% [...]`)."""
    lines: list[str] = []
    if table.empty:
        return lines
    for (axis, value, reference, same, workload), group in table.groupby(
            ["axis", "value", "reference", "same", "workload"], sort=True):
        where = f" ({same})" if same else ""
        lines.append(f"{axis} {value} vs {reference}{where}, {split(group.baseline.iloc[0])[1]} "
                     f"to {split(group.baseline.iloc[0])[1]} on {workload}: "
                     f"{_level_parts(group)}")
    return lines


def verdict_line(row: pd.Series, with_workload: bool = False) -> str:
    """`EAGLE-3 beats baseline at c=4` only when the interval excludes zero (`... on coding at
    c=4` when the run has several workloads)."""
    where = fmt_load(row.load_kind, row.load)
    if with_workload:
        where = f"{where} on {row.workload}"
    baseline = split(row.baseline)[1]
    if row.verdict == UNDETERMINED:
        return (f"{row.variant} vs {baseline} at {where}: {UNDETERMINED} "
                f"({cost_text(row.speedup, row.lo, row.hi, int(row.repeats), short=True)})")
    word = "beats" if row.verdict == "faster" else "loses to"
    return (f"{row.variant} {word} {baseline} at {where} by {_pct(row.speedup)} "
            f"[{_pct(row.lo)}, {_pct(row.hi)}]")


@dataclass
class Decision:
    """Everything the run decided, for the terminal, the report and decision.json."""

    speedups: pd.DataFrame
    goodput_speedups: pd.DataFrame
    crossovers: list[Crossover]
    recommendations: list[dict]
    thresholds: dict
    setups: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The setups (engine, model, hardware) compared baseline to baseline (output tok/s)."""
    baseline: str = "baseline"
    """The name of the variant each setup's others are compared with."""
    repeats: dict = field(default_factory=dict)
    """What the intervals cover (`repeats_summary`): the most repeats of a point, the pooled
    between-repeat noise, the points whose repeats disagree."""

    def as_json(self) -> dict:
        def rows(table: pd.DataFrame) -> list[dict]:
            if table.empty:
                return []
            return [{str(k): v for k, v in r.items() if not str(k).startswith("_")}
                    for r in table.to_dict("records")]
        return json_safe({
            "speedups": rows(self.speedups),
            "goodput_speedups": rows(self.goodput_speedups),
            "crossovers": [{"variant": c.variant, "workload": c.workload,
                            "load_kind": c.load_kind, "crossover": c.point,
                            "interval": [c.lo, c.hi], "tested": c.loads,
                            "assumed": list(c.assumed) if c.assumed else None,
                            "statement": c.describe()} for c in self.crossovers],
            "recommendations": self.recommendations,
            "thresholds": self.thresholds,
            "setup_comparisons": rows(self.setups),
            "repeats": self.repeats,
        })

    def lines(self) -> list[str]:
        out = speedup_lines(self.speedups)
        if not self.speedups.empty and self.repeats:
            out += repeat_lines(self.repeats)
        if not self.speedups.empty:
            several = self.speedups.workload.nunique() > 1
            decided = self.speedups[self.speedups.verdict != UNDETERMINED]
            held = decided.holm.astype(bool) if "holm" in decided else decided.verdict.isna()
            family = f"Holm's step-down over the {len(self.speedups)} comparisons"
            sig = [verdict_line(r, several) for _, r in decided[held].iterrows()]
            if sig:
                out.append(f"significant (95% interval excludes zero; {family} keeps it): "
                           + "; ".join(sig))
            alone = [verdict_line(r, several) for _, r in decided[~held].iterrows()]
            if alone:
                out.append(f"significant alone, not over the comparisons ({family}): "
                           + "; ".join(alone))
            open_ = [verdict_line(r, several) for _, r in self.speedups.iterrows()
                     if r.verdict == UNDETERMINED]
            if open_:
                out.append("undetermined (95% interval holds zero: not evidence of no "
                           "difference; the smallest effect each could detect is its "
                           f"half-width, and {RULE}): " + "; ".join(open_))
        for c in self.crossovers:
            out.append(f"{c.variant} vs {self.baseline} on {c.workload}: {c.describe()}")
        for r in self.recommendations:
            out.append(f"recommendation for {r['variant']} on {r['workload']}: "
                       f"{r['statement']}")
        for w in self.thresholds.get("overall", []):
            verdict = (f"wins by {_pct(w['margin'])} [{_pct(w['lo'])}, {_pct(w['hi'])}]"
                       if w["significant"] else f"leads, but {NO_DIFFERENCE} "
                       f"({_pct(w['margin'])} [{_pct(w['lo'])}, {_pct(w['hi'])}])")
            out.append(f"threshold sweep on {w['workload']} by {w['metric']}: {w['winner']} "
                       f"{verdict} over {w['runner_up']} across {w['levels']} load levels"
                       f"{best_share(w.get('wins_share'))}")
        compared = setup_lines(self.setups)
        if compared:
            out += ["", "setups compared (each variant above is compared only with its own "
                    "setup's baseline):", *(f"  {line}" for line in compared)]
        return out


def decide(stats: CellStats, baseline: str = "baseline") -> Decision:
    pts = points(stats)
    tok = speedups(pts, baseline, "output_tok_s")
    good = speedups(pts, baseline, "goodput_tok_s")
    spec = set(stats.table.loc[stats.table.get("accept_length", pd.Series(dtype=float))
                               .notna(), "variant"]) if not stats.table.empty else set()
    cross = crossovers(tok)
    recs = [recommend_threshold(tok, c) for c in cross
            if c.load_kind == "concurrency" and c.variant in spec
            and not THRESHOLD_LABEL.search(c.variant)]
    axes = varying(stats.table[stats.table.status == "done"]) if not stats.table.empty else []
    return Decision(tok, good, cross, recs, threshold_winners(pts),
                    setup_comparisons(pts, axes, baseline), baseline,
                    repeats_summary(pts))
