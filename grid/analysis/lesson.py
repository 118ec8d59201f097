"""Does the alignment figure predict real acceptance? Per speculative variant and workload: the
decode accept length measured per request (with its 95 % bootstrap interval), the workload's
alignment with the drafter's training data, and across workloads their Spearman rank
correlation and the most against the least aligned workload's gap (definitions:
docs/lesson.md). Pure pandas: callable by the report and by notebooks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import DEFAULT_REPLICATES, Resample, interval, seed_for

REQUEST_COLUMNS = ["cell_id", "status", "output_tokens", "spec_verify_ct", "domain"]
"""Request columns this module reads (pass them to grid.store.loader.load_requests)."""
CELL_COLUMNS = ["cell_id", "status", "variant", "workload", "concurrency", "temperature",
                "alignment", "alignment_ok", "source"]
"""Cell columns this module reads."""
TABLE_COLUMNS = ["variant", "temperature", "concurrency", "workload", "domain", "requests",
                 "accept_length", "lo", "hi", "alignment", "alignment_ok", "source"]
MIN_WORKLOADS = 3
"""Fewer workloads give no rank correlation (two points always have rho = +-1)."""


def acceptance_table(requests: pd.DataFrame, cells: pd.DataFrame,
                     replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> pd.DataFrame:
    """One row per speculative variant x temperature x concurrency x workload with completed
    speculative requests: requests, accept length and its interval, alignment, source."""
    if requests.empty or cells.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    keep = [c for c in CELL_COLUMNS if c in cells]
    done = cells.loc[cells.status == "done", keep].copy()
    for col in ("temperature", "alignment", "alignment_ok", "source"):
        if col not in done:
            done[col] = None
    req = requests[(requests.status == "ok") & requests.spec_verify_ct.notna()
                   & (requests.spec_verify_ct > 0) & (requests.output_tokens >= 1)]
    req = req.merge(done, on="cell_id", suffixes=("_request", ""))
    rows = []
    keys = ["variant", "temperature", "concurrency", "workload"]
    for key, group in req.groupby(keys, dropna=False, observed=True):
        variant, temperature, concurrency, workload = key
        num = (group.output_tokens - 1).to_numpy(dtype=float)
        den = group.spec_verify_ct.to_numpy(dtype=float)
        draw = Resample.draw(len(group), replicates,
                             seed_for(f"lesson:{variant}:{workload}:{temperature}", seed))
        sums = draw.sums(np.column_stack([num, den]))
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = interval(sums[:, 0] / sums[:, 1])
        domains = sorted({str(d) for d in group.domain.dropna()})
        rows.append({
            "variant": str(variant), "workload": str(workload),
            "temperature": _number(temperature, float),
            "concurrency": _number(concurrency, int),
            "domain": domains[0] if len(domains) == 1 else ", ".join(domains) or None,
            "requests": len(group), "accept_length": float(num.sum() / den.sum()),
            "lo": lo, "hi": hi,
            "alignment": _first(group.alignment), "alignment_ok": _first(group.alignment_ok),
            "source": _first(group.source),
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _number(value: Any, kind: type) -> Any:
    """A group key as a plain number (None for a missing one: NaN keys from dropna=False)."""
    return None if value is None or pd.isna(value) else kind(value)


def _first(values: pd.Series) -> object:
    known = values.dropna()
    return known.iloc[0] if len(known) else None


def relations(table: pd.DataFrame) -> list[dict[str, object]]:
    """Per variant x temperature x concurrency with alignment known on several workloads:
    Spearman's rho (and its p-value) between alignment and accept length, the workloads and
    requests behind it, and the most against the least aligned workload."""
    out: list[dict[str, object]] = []
    known = table[table.alignment.notna()]
    for key, group in known.groupby(["variant", "temperature", "concurrency"], dropna=False):
        variant, temperature, concurrency = key
        group = group.sort_values("alignment", ascending=False)
        rho = p_value = None
        if len(group) >= MIN_WORKLOADS:
            from scipy.stats import spearmanr  # here: scipy.stats adds ~0.7 s to a CLI start
            result = spearmanr(group.alignment.astype(float), group.accept_length.astype(float))
            rho, p_value = float(result.statistic), float(result.pvalue)
            if math.isnan(rho):  # a constant column: no ranking to correlate
                rho = p_value = None
        top, bottom = group.iloc[0], group.iloc[-1]
        out.append({
            "variant": str(variant),
            "temperature": _number(temperature, float),
            "concurrency": _number(concurrency, int),
            "workloads": len(group), "requests": int(group.requests.sum()),
            "spearman": rho, "p_value": p_value,
            "most_aligned": _point(top), "least_aligned": _point(bottom),
            "apart": bool(len(group) > 1 and (top.lo > bottom.hi or top.hi < bottom.lo)),
        })
    return out


def _point(row: pd.Series) -> dict[str, object]:
    return {"workload": str(row.workload), "alignment": float(row.alignment),
            "accept_length": float(row.accept_length), "lo": float(row.lo), "hi": float(row.hi)}


def relation_lines(table: pd.DataFrame) -> list[str]:
    """The sentences the report prints under the table."""
    lines = []
    for r in relations(table):
        temp = "" if r["temperature"] is None else f" at temperature {r['temperature']:g}"
        top, bottom = r["most_aligned"], r["least_aligned"]
        assert isinstance(top, dict) and isinstance(bottom, dict)
        rho = ("rank correlation undefined (fewer than 3 workloads or a constant column)"
               if r["spearman"] is None else
               f"Spearman rho {r['spearman']:+.2f} (p {r['p_value']:.2g})")
        lines.append(
            f"{r['variant']}{temp}, c={r['concurrency']}: {rho} between alignment and accept "
            f"length over {r['workloads']} workloads ({r['requests']} requests); most aligned "
            f"{top['workload']} ({top['alignment']:.2f}) accepts {top['accept_length']:.2f} "
            f"[{top['lo']:.2f}, {top['hi']:.2f}], least aligned {bottom['workload']} "
            f"({bottom['alignment']:.2f}) {bottom['accept_length']:.2f} "
            f"[{bottom['lo']:.2f}, {bottom['hi']:.2f}]: intervals "
            + ("apart" if r["apart"] else "overlap"))
    return lines
