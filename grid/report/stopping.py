"""The report's findings about how cells stopped (grid/store/stopping.py's columns): cells
stopped over-saturated, whose numbers are not a steady state; targeted cells that hit their cap
before their precision target; cells stopped at it whose own interval is wider; how many
stopped at it."""

from __future__ import annotations

import pandas as pd

from grid.store.stopping import WIDER


def _name(row: object) -> str:
    rate = getattr(row, "rate", None)
    load = (f"{rate:g}/s" if rate is not None and not pd.isna(rate)
            else f"c={int(getattr(row, 'concurrency', 0) or 0)}")
    return f"{getattr(row, 'variant', '?')} {load}"


def stop_findings(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """(level, text) lines for the validity section."""
    if "stop_reason" not in cells or not len(cells):
        return []
    done = cells[cells.status == "done"]
    out: list[tuple[str, str]] = []
    over = done[done.stop_reason == "over_saturated"]
    if len(over):
        shown = "; ".join(f"{_name(r)}: {r.stop_detail}" for r in over.head(4).itertuples())
        more = f" and {len(over) - 4} more" if len(over) > 4 else ""
        out.append(("warning", f"over-saturated in {len(over)} cell(s) (the server did not keep "
                               "up: TTFT rising at a fixed concurrency or a backlog growing at "
                               "the arrival rate), stopped early: their numbers are not a "
                               "steady state, and no capacity is claimed at or beyond "
                               f"them: {shown}{more}"))
    capped = done[(done.stop_reason == "cap")
                  & done.stop_detail.fillna("").str.startswith("precision not reached")]
    if len(capped):
        shown = "; ".join(f"{_name(r)} ({r.stop_detail})" for r in capped.head(8).itertuples())
        out.append(("warning", f"precision target not reached in {len(capped)} cell(s) "
                               f"before the cap (load.max_requests): {shown}"))
    stopped = done[done.stop_reason == "target"]
    wider = stopped.stop_detail.fillna("").str.startswith(WIDER)
    if wider.any():
        shown = "; ".join(f"{_name(r)} {str(r.stop_detail).removeprefix(WIDER + ' ')}"
                          for r in stopped[wider].head(8).itertuples())
        out.append(("warning", f"{int(wider.sum())} cell(s) stopped at their precision target "
                               f"with an interval over all their requests wider than it: "
                               f"{shown}"))
    reached = stopped[~wider]
    if len(reached):
        out.append(("note", f"{len(reached)} cell(s) stopped at their precision target, "
                            f"{int(reached.requests_ok.fillna(0).sum())} requests in all"))
    return out
