"""The operator's view, part one: output tok/s per user against output tok/s per GPU across
loads (the view vLLM's `bench sweep plot_pareto` draws), the Pareto frontier of those points,
and what a cell's output tokens cost in dollars and joules. Definitions and intervals:
docs/report.md ("The operator's view"). `frontier` is over every variant of a workload,
`variant_frontier` over the variant's own loads."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import interval
from grid.analysis.cellstats import CellStats
from grid.analysis.points import Point, points

SECONDS_PER_HOUR = 3600.0
PER_MILLION = 1e6
COLUMNS = ["variant", "workload", "concurrency", "repeats", "gpus",
           "output_tok_s", "output_tok_s_lo", "output_tok_s_hi",
           "tok_s_per_user", "tok_s_per_user_lo", "tok_s_per_user_hi",
           "tok_s_per_gpu", "tok_s_per_gpu_lo", "tok_s_per_gpu_hi",
           "frontier", "variant_frontier",
           "usd_per_mtok", "usd_per_mtok_lo", "usd_per_mtok_hi", "j_per_token"]
"""The frontier table's columns, one row per (variant, workload, concurrency)."""


def usd_per_million_tokens(tok_s: float, gpus: float | None,
                           usd_per_gpu_hour: float | None) -> float:
    """Dollars per million output tokens produced at `tok_s` on `gpus` GPUs rented at
    `usd_per_gpu_hour` each: gpus x price / 3600 (dollars per second) / tok_s x 1e6. NaN when
    the price or the GPUs are unknown or nothing was produced."""
    if usd_per_gpu_hour is None or gpus is None or not gpus or not tok_s > 0 \
            or not math.isfinite(tok_s):
        return math.nan
    return float(gpus) * usd_per_gpu_hour / SECONDS_PER_HOUR / tok_s * PER_MILLION


def frontier_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where no other point has x' >= x and y' >= y with one of them larger (both
    maximised); a point with a NaN coordinate is never on the frontier and dominates none."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    out = ok.copy()
    for i in np.flatnonzero(ok):
        others = ok & (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))
        out[i] = not others.any()
    return out


def point_gpus(point: Point, gpus: Mapping[str, float | None]) -> float | None:
    """The GPUs that served a point's cells (its repeats share one server setup); None when
    unknown for any of them or when they disagree."""
    found = {gpus.get(c) for c in point.cell_ids}
    if len(found) != 1:
        return None
    (value,) = found
    return None if value is None or not value > 0 else float(value)


def point_energy(point: Point, j_per_token: Mapping[str, float] | None) -> float:
    """Mean joules per output token over the point's cells where power was read (NaN else)."""
    values = [j_per_token[c] for c in point.cell_ids
              if j_per_token and c in j_per_token and math.isfinite(j_per_token[c])]
    return float(np.mean(values)) if values else math.nan


def pareto(stats: CellStats, gpus: Mapping[str, float | None],
           usd_per_gpu_hour: float | None = None,
           j_per_token: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per closed-loop (variant, workload, concurrency) point (repeats averaged): its
    output tok/s, per user and per GPU with their intervals, whether it is on the workload's
    and on its variant's frontier, dollars per million output tokens (with `usd_per_gpu_hour`)
    and joules per token (with `j_per_token`, cell id -> J/token). `gpus`: cell id -> GPUs
    that served it (None = unknown: no per-GPU figure, not on any frontier)."""
    rows = []
    for p in points(stats, ("output_tok_s",)):
        if p.load_kind != "concurrency" or not p.load > 0:
            continue
        tok = p.values["output_tok_s"]
        lo, hi = interval(p.replicates["output_tok_s"])
        n = point_gpus(p, gpus)
        per_gpu = [v / n if n else math.nan for v in (tok, lo, hi)]
        rows.append({
            "variant": p.variant, "workload": p.workload, "concurrency": p.load,
            "repeats": p.repeats, "gpus": n, "output_tok_s": tok, "output_tok_s_lo": lo,
            "output_tok_s_hi": hi, "tok_s_per_user": tok / p.load,
            "tok_s_per_user_lo": lo / p.load, "tok_s_per_user_hi": hi / p.load,
            "tok_s_per_gpu": per_gpu[0], "tok_s_per_gpu_lo": per_gpu[1],
            "tok_s_per_gpu_hi": per_gpu[2],
            "usd_per_mtok": usd_per_million_tokens(tok, n, usd_per_gpu_hour),
            # the faster end of the throughput interval is the cheaper end of the cost's
            "usd_per_mtok_lo": usd_per_million_tokens(hi, n, usd_per_gpu_hour),
            "usd_per_mtok_hi": usd_per_million_tokens(lo, n, usd_per_gpu_hour),
            "j_per_token": point_energy(p, j_per_token)})
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    table["frontier"] = False
    table["variant_frontier"] = False
    for keys, column in ((["workload"], "frontier"), (["variant", "workload"],
                                                     "variant_frontier")):
        for _, group in table.groupby(keys, sort=False):
            mask = frontier_mask(group.tok_s_per_user.to_numpy(), group.tok_s_per_gpu.to_numpy())
            table.loc[group.index, column] = mask
    return table.sort_values(["workload", "variant", "concurrency"]).reset_index(drop=True)
