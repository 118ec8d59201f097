"""A cell row's stop columns: why its load stopped issuing requests (`stop_reason`), in words
(`stop_detail`), the interval it reached against its precision target (`stop_half_width`) and
the over-saturation evidence (`stop_evidence`, JSON). From the clients' stats and the cell's
request rows; pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from grid.plan.cells import Cell
from specgrid_metrics import precision
from specgrid_metrics.bootstrap import DEFAULT_REPLICATES, seed_for
from specgrid_metrics.intervals import RequestArrays
from specgrid_metrics.precision import Target

PRIORITY = ("over_saturated", "cap", "duration", "target", "count")
"""The cell's reason when its clients' differ: the first of these any client gave (a cell is
over-saturated if any client saw it; it reached its target only if every client did)."""
STOP_COLUMNS = ("stop_reason", "stop_detail", "stop_half_width", "stop_evidence")
WIDER = "stopped at its target, but the cell's interval over all its requests is wider"
"""How a `target` cell's detail begins when the check that stopped its load met the target and
the cell's own interval does not: the client checked its share (several clients), or the
requests in flight at the stop, which finish after it and a bootstrap of its own, moved the
interval past the goal (one client; by a few per cent of it). The report names such cells."""


def _arrays(rows: Sequence[Mapping[str, Any]]) -> RequestArrays:
    def col(key: str) -> np.ndarray:
        return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows])

    return RequestArrays(col("sent_at"), col("ttft_s"), col("tpot_s"), col("e2e_s"),
                         col("output_tokens"), np.array([r.get("status") == "ok" for r in rows],
                                                        dtype=bool))


def stop_columns(cell: Cell, targets: Sequence[Target], rows: Sequence[Mapping[str, Any]],
                 stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The stop columns of a prompt cell from its clients' `stats` and all its request rows.
    With a target, the half-width is the cell's own interval over all clients' requests, by
    the report's bootstrap with the report's seed (the figure the report shows), and the
    detail says whether the target was reached."""
    reasons = [s.get("stop_reason") for s in stats if s.get("stop_reason")]
    if not reasons:
        return dict.fromkeys(STOP_COLUMNS)
    reason = next(r for r in PRIORITY if r in reasons)
    source = next(s for s in stats if s.get("stop_reason") == reason)
    out: dict[str, Any] = {"stop_reason": reason, "stop_detail": source.get("stop_detail"),
                           "stop_half_width": None, "stop_evidence": source.get("stop_evidence")}
    if targets and rows:
        result = precision.check(_arrays(rows), targets, cell.concurrency, cell.rate is None,
                                 DEFAULT_REPLICATES, seed_for(cell.cell_id))
        worst = result.worst(targets)
        width = result.widths.get(worst.metric, math.inf)
        out["stop_half_width"] = width if math.isfinite(width) else None
        words = precision.describe_result(targets, result, reached=result.met)
        if reason == "target" and not result.met:
            why = ("each client met its share of the target" if len(stats) > 1 else
                   "its check met the target before the requests then in flight finished")
            out["stop_detail"] = f"{WIDER} ({why}): {words}"
        elif reason != "over_saturated":
            out["stop_detail"] = words if reason != "duration" else f"time bound: {words}"
    elif reason in ("count", "duration") and out["stop_detail"] is None:
        out["stop_detail"] = (f"{len(rows)} requests" if reason == "count" else
                              f"time bound (load.duration_s) after {len(rows)} requests")
    broken = next((s["check_error"] for s in stats if s.get("check_error")), None)
    if broken:
        out["stop_detail"] = f"{out['stop_detail'] or reason}; the checks stopped: {broken}"
    return out
