"""The run's answer in one sentence, from its decision (grid/analysis/decision.py): the first
line of the terminal summary and of report.html, before any table. Per speculative variant and
workload with a recommendation: where speculation pays (with the speedup at the lowest tested
concurrency and its 95 % interval) and the `speculative_disable_above_batch` to set; without
one, the speedups themselves. A simulated run's recommendation follows its model's assumed
interior (grid/report/assumed.py): its range is said, and an undetermined one names the loads to
measure. A run that asked a question (an adaptive search, grid/questions/) leads with that
question's answer, the per-variant sentence after it (`answers`)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from grid.analysis.decision import NO_DIFFERENCE, Decision
from grid.analysis.setups import split
from grid.questions import traced

MOST = 3
"""Clauses the sentence holds; more are counted, and the decision below lists them all."""


def _pct(x: float) -> str:
    return f"{100 * x:+.0f} %" if math.isfinite(x) else "?"


def _load(kind: str, load: float) -> str:
    return f"c={load:g}" if kind == "concurrency" else f"{load:g}/s"


def _evidence(row: Any) -> str:
    """`c=1 +8 % [+3 %, +12 %]` (`, not significant` when the interval holds zero)."""
    tag = ", not significant" if row.verdict == NO_DIFFERENCE else ""
    return (f"{_load(row.load_kind, row.load)} {_pct(row.speedup)} "
            f"[{_pct(row.lo)}, {_pct(row.hi)}]{tag}")


def _rows(decision: Decision, variant: str, workload: str) -> pd.DataFrame:
    t = decision.speedups
    return t[(t.variant == variant) & (t.workload == workload)
             & (t.load_kind == "concurrency")].sort_values("load")


def _clause(decision: Decision, rec: dict) -> str:
    variant, workload = rec["variant"], rec["workload"]
    rows = _rows(decision, variant, workload)
    threshold = rec.get("speculative_disable_above_batch")
    paying = rows[rows.verdict == "faster"]
    assumed: dict = rec.get("assumed") or {}  # a simulated run: its assumed interior decides
    if rec.get("undetermined"):
        low, high = rec["undetermined"]
        return (f"{variant} on {workload}: speculative_disable_above_batch is undetermined "
                f"between {low} and {high} ({assumed['text']}): measure "
                f"c={assumed['measure']} on your node to settle it")
    if threshold is None:
        shown = _evidence(rows.iloc[0]) if len(rows) else "see below"
        top = f"{rows.load.max():g}" if len(rows) else "the highest tested"
        return (f"{variant} pays at every tested concurrency on {workload} ({shown}, up to "
                f"c={top}): keep speculation on, no threshold needed in the tested range")
    if threshold == 0:
        shown = _evidence(rows.iloc[0]) if len(rows) else "no significant gain"
        losing = rows[rows.verdict == "slower"]
        loses = (f", slower from {_load('concurrency', float(losing.load.min()))}"
                 if len(losing) else "")
        return (f"{variant} does not pay on {workload} ({shown}{loses}): keep speculation "
                f"off, speculative_disable_above_batch=0")
    first = paying.iloc[0] if len(paying) else (rows.iloc[0] if len(rows) else None)
    shown = f" ({_evidence(first)})" if first is not None else ""
    why = (f" ({assumed['text']}; measure c={assumed['measure']} on your node to check it)"
           if assumed else "")
    return (f"{variant} pays up to concurrency {threshold} on {workload}{shown}; above it, "
            f"keep speculation off: speculative_disable_above_batch={threshold}{why}")


def answer(decision: Decision, label: str | None = None) -> str:
    """One sentence (`label`, e.g. SIMULATION, appended in brackets: where the numbers come
    from)."""
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
        text = "no variant was compared with a baseline in this run"
    return f"{text}{f' [{label}]' if label else ''}."


def answers(decision: Decision, label: str | None = None, search: dict | None = None
            ) -> list[str]:
    """The report's leading sentences: the asked question's answer first (where the run's
    search has one), then the per-variant sentence (`answer`)."""
    asked = traced(search).answer(search) if search else None
    tag = f" [{label}]" if label else ""
    return ([f"{asked}{tag}."] if asked else []) + [answer(decision, label)]
