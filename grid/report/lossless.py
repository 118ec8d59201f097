"""The report's losslessness section (grid/analysis/lossless.py): per variant and workload,
how many greedy requests returned exactly the baseline's output, where the others diverged,
the baseline's own floor and the flag. Shown when the run has greedy cells of a variant and of
its baseline on one workload."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grid.analysis.lossless import (
    ALPHA,
    REQUEST_COLUMNS,
    TABLE_COLUMNS,
    as_json,
    lossless_table,
    statement,
)
from grid.report.markup import dash, esc, html_table
from grid.report.rundata import RunData
from grid.store.loader import DamagedFileError, load_requests

RULE = ("identical = the same output text (blake2b-128 of the whole text) as the baseline's "
        "reference output for the prompt (its first completed request at its lowest load); "
        "divergence = characters of the output text before the first difference; floor = the "
        "baseline's other requests (other loads, repeats) against the same reference; "
        f"flagged = fraction identical below the floor's, one-sided Fisher exact p < {ALPHA}, "
        "or any divergence when no floor was measured")


def load_table(run_dir: Path, cells: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The analysis over the run's greedy cells (reads only their output columns)."""
    if cells.empty or "temperature" not in cells:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    ids = sorted(cells.cell_id[(cells.status == "done") & (cells.temperature == 0)])
    if not ids:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    damaged: list[DamagedFileError] = []  # the report lists them already (grid/report/data.py)
    requests = load_requests(run_dir, columns=REQUEST_COLUMNS,
                             filters=[("cell_id", "in", ids)], damaged=damaged)
    return lossless_table(requests, cells, baseline)


def section(data: RunData) -> str:
    """The text block (empty without a greedy variant and baseline to compare)."""
    t = data.lossless
    if t.empty:
        return ""
    label = f" [{data.label}]" if data.label else ""
    wide = max(12, *(len(str(w)) for w in t.workload))
    lines = [f"losslessness at temperature 0{label}: greedy outputs against the baseline's",
             f"  {'variant':<24} {'workload':<{wide}} {'compared':>8} {'identical':>9} "
             f"{'median div (chars)':>18} {'floor':>12}  flag"]
    for _, r in t.iterrows():
        floor = (f"{r.floor_fraction:.0%} of {r.floor_compared}" if r.floor_compared
                 else "none")
        flag = "FLAGGED" if r.flagged else ("-" if r.flagged is None else "ok")
        lines.append(f"  {r.variant:<24} {r.workload:<{wide}} {r.compared:>8} "
                     f"{dash(r.fraction_identical, '{:.0%}'):>9} "
                     f"{dash(r.median_divergence_chars, '{:.0f}'):>18} {floor:>12}  {flag}")
    lines += [f"  {statement(r)}" for _, r in t.iterrows() if r.flagged]
    lines.append(f"  ({RULE})")
    return "\n".join(lines)


def html_section(data: RunData) -> str:
    """The HTML block (empty as `section`)."""
    t = data.lossless
    if t.empty:
        return ""
    head = ["variant", "baseline", "workload", "compared", "identical", "median divergence "
            "(chars)", "floor (baseline vs itself)", "floor median divergence", "p", "flag"]
    rows = []
    for _, r in t.iterrows():
        floor = (f"{r.floor_identical}/{r.floor_compared} ({r.floor_fraction:.0%})"
                 if r.floor_compared else "none measured")
        flag = ("<b class=warning>FLAGGED</b>" if r.flagged
                else ("–" if r.flagged is None else "within the floor"))
        rows.append([esc(str(r.variant)), esc(str(r.baseline)), esc(str(r.workload)),
                     str(r.compared),
                     f"{r.identical} ({dash(r.fraction_identical, '{:.0%}')})",
                     dash(r.median_divergence_chars, "{:.0f}"), floor,
                     dash(r.floor_median_divergence_chars, "{:.0f}"),
                     dash(r.p_value, "{:.3g}"), flag])
    table = html_table(head, rows)
    label = f" ({esc(data.label)})" if data.label else ""
    return (f"<h2>Losslessness at temperature 0{label}</h2><p>With greedy sampling a "
            "speculative variant must return the baseline's tokens; a lossy drafter or a "
            f"numerics problem would otherwise pass for a speedup. {esc(RULE)}.</p>{table}")


def decision(data: RunData) -> list[dict[str, object]]:
    """decision.json's `lossless`: one entry per variant x workload."""
    return as_json(data.lossless)
