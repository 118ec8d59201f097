"""The run's answer in one sentence, from its decision (grid/analysis/decision.py): the first
line of the terminal summary and of report.html, before any table (docs/report.md, "The
answer"). A simulated run's recommendation follows its model's assumed interior
(grid/report/assumed.py); a run that asked a question (grid/questions/) leads with that
question's answer, the per-variant sentence after it (`answers`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from grid.analysis.decision import Decision
from grid.analysis.points import REPEAT_OVERRIDE, fmt_load
from grid.analysis.setups import split
from grid.analysis.verdict import FASTER, RULE, SLOWER, UNDETERMINED, cost_text, pct
from grid.questions import traced

MOST = 3
"""Clauses the sentence holds; more are counted, and the decision below lists them all."""


def _evidence(row: Any) -> str:
    """`c=1 +8 % [+3 %, +12 %]` (`, undetermined` when the interval holds zero)."""
    tag = f", {UNDETERMINED}" if row.verdict == UNDETERMINED else ""
    return (f"{fmt_load(row.load_kind, row.load)} {pct(row.speedup)} "
            f"[{pct(row.lo)}, {pct(row.hi)}]{tag}")


def _rows(decision: Decision, variant: str, workload: str) -> pd.DataFrame:
    t = decision.speedups
    return t[(t.variant == variant) & (t.workload == workload)
             & (t.load_kind == "concurrency")].sort_values("load")


def _undetermined(rec: dict, rows: pd.DataFrame) -> str:
    variant, workload = rec["variant"], rec["workload"]
    assumed: dict = rec.get("assumed") or {}
    low, high = rec["undetermined"]
    if assumed:  # a simulated run: its model's assumed interior leaves it open
        return (f"{variant} on {workload}: speculative_disable_above_batch is undetermined "
                f"between {low} and {high} ({assumed['text']}): measure "
                f"c={assumed['measure']} on your node to settle it")
    first = rows.iloc[0]
    losing = rows[rows.verdict == SLOWER]
    bound = (f"; slower from {fmt_load('concurrency', float(losing.load.min()))}, so "
             f"speculative_disable_above_batch={high} at most" if high is not None
             and len(losing) else "")
    return (f"{variant} on {workload}: undetermined whether speculation pays "
            f"({fmt_load(first.load_kind, first.load)} {pct(first.speedup)} [{pct(first.lo)}, "
            f"{pct(first.hi)}]: {cost_text(first.speedup, first.lo, first.hi, int(first.repeats))})"
            f"{bound}; not evidence to turn it off")


def _clause(decision: Decision, rec: dict) -> str:
    variant, workload = rec["variant"], rec["workload"]
    rows = _rows(decision, variant, workload)
    threshold = rec.get("speculative_disable_above_batch")
    paying = rows[rows.verdict == FASTER]
    assumed: dict = rec.get("assumed") or {}  # a simulated run: its assumed interior decides
    if rec.get("undetermined") and (assumed or len(rows)):
        return _undetermined(rec, rows)
    if threshold is None:
        shown = _evidence(rows.iloc[0]) if len(rows) else "see below"
        top = f"{rows.load.max():g}" if len(rows) else "the highest tested"
        return (f"{variant} pays at every tested concurrency on {workload} ({shown}, up to "
                f"c={top}): keep speculation on, no threshold needed in the tested range")
    if threshold == 0:
        shown = _evidence(rows.iloc[0]) if len(rows) else "no significant gain"
        losing = rows[rows.verdict == SLOWER]
        loses = (f", slower from {fmt_load('concurrency', float(losing.load.min()))}"
                 if len(losing) else "")
        return (f"{variant} does not pay on {workload} ({shown}{loses}): keep speculation "
                f"off, speculative_disable_above_batch=0")
    first = paying.iloc[0] if len(paying) else (rows.iloc[0] if len(rows) else None)
    shown = f" ({_evidence(first)})" if first is not None else ""
    if assumed:
        return (f"{variant} pays up to concurrency {threshold} on {workload}{shown}; above it, "
                f"keep speculation off: speculative_disable_above_batch={threshold} "
                f"({assumed['text']}; measure c={assumed['measure']} on your node to check it)")
    top = (rec.get("plausible_range") or [threshold, threshold])[1]
    if top == threshold:
        return (f"{variant} pays up to concurrency {threshold} on {workload}{shown}; above it, "
                f"keep speculation off: speculative_disable_above_batch={threshold}")
    above = rows[rows.load > threshold]
    open_ = above[above.verdict == UNDETERMINED]
    settle = (f": undetermined at {', '.join(fmt_load('concurrency', c) for c in open_.load)}, "
              f"{_repeats(open_.iloc[0])}" if len(open_) else "")
    return (f"{variant} pays up to concurrency {threshold} on {workload}{shown}: "
            f"speculative_disable_above_batch={threshold}, plausible range {threshold} to "
            f"{f'{rows.load.max():g} or above' if top is None else top}{settle}")


def _repeats(row: Any) -> str:
    """`about 8 repeats would resolve it` (RULE: the half-width shrinks as 1/sqrt(repeats))."""
    need = row.repeats_needed
    if need is None or pd.isna(need):
        return f"an effect within ±{100 * row.half_width:.0f} % the run could not detect"
    return f"about {int(need)} repeats would resolve {pct(row.speedup)} ({RULE})"


def scope(decision: Decision, provisional: bool) -> str:
    """What the intervals cover, said in the first sentence: `one repeat: within-run noise
    only` (on a real engine: the recommendation is provisional, with the override that adds
    repeats) or `3 repeats: ...`."""
    most = int(decision.repeats.get("most") or 0) if decision.repeats else 0
    if most >= 2:
        return f"{most} repeats: intervals cover the spread between runs"
    if provisional:
        return ("provisional: one repeat, within-run noise only; measure again with "
                f"{REPEAT_OVERRIDE} before acting on it")
    return "one repeat: within-run noise only"


def answer(decision: Decision, label: str | None = None, provisional: bool = False) -> str:
    """One sentence, its scope (`scope`) before its `label` (e.g. SIMULATION, in brackets:
    where the numbers come from); `provisional`: a real engine's run."""
    tag = f" [{label}]" if label else ""
    recs = sorted(decision.recommendations, key=lambda r: (str(r["workload"]),
                                                           str(r["variant"])))
    if recs:
        clauses = [_clause(decision, r) for r in recs[:MOST]]
        more = len(recs) - MOST
        text = "; ".join(clauses) + (f"; and {more} more variant(s) below" if more > 0 else "")
    elif not decision.speedups.empty:
        t = decision.speedups.sort_values(["variant", "workload", "load_kind", "load"])
        parts = [f"{r.variant} vs {split(str(r.baseline))[1]} on {r.workload}: {_evidence(r)}"
                 for r in t.head(MOST).itertuples()]
        more = len(t) - MOST
        text = ("no threshold to recommend (one load level, or no speculative variant); "
                + "; ".join(parts) + (f"; and {more} more below" if more > 0 else ""))
    elif not decision.setups.empty:
        text = "no variant to compare with its baseline; the setups are compared below"
    else:
        return f"no variant was compared with a baseline in this run{tag}."
    return f"{text} ({scope(decision, provisional)}){tag}."


def answers(decision: Decision, label: str | None = None, search: dict | None = None,
            provisional: bool = False) -> list[str]:
    """The report's leading sentences: the asked question's answer first (where the run's
    search has one, with its scope), then the per-variant sentence (`answer`)."""
    asked = traced(search).answer(search) if search else None
    tag = f" [{label}]" if label else ""
    return (([f"{asked} ({scope(decision, provisional)}){tag}."] if asked else [])
            + [answer(decision, label, provisional)])
