"""The report's findings about how cells stopped (grid/store/stopping.py's columns): cells
stopped over-saturated, whose numbers are not a steady state; targeted cells that hit their cap
before their precision target; cells stopped at it whose own interval is wider (a note, not a
warning, where it is wider by less than the goal's last printed digit); how many stopped at
it."""

from __future__ import annotations

import re

import pandas as pd

from grid.store.stopping import WIDER


def _name(row: object) -> str:
    rate = getattr(row, "rate", None)
    load = (f"{rate:g}/s" if rate is not None and not pd.isna(rate)
            else f"c={int(getattr(row, 'concurrency', 0) or 0)}")
    return f"{getattr(row, 'variant', '?')} {load}"


TARGET = re.compile(r"\(target ±(\d+(?:\.\d+)?) %")
"""The goal as a stop detail prints it (specgrid_metrics/precision.py `describe_result`)."""


def _within_digit(row: pd.Series) -> bool:
    """A cell stopped at its target whose own interval misses it by less than the goal's last
    printed digit (±5.2 % against ±5 %: rounds to the goal; ±5.6 % does not): the check that
    stopped it met the goal, and the requests then in flight, finished after the stop, moved
    the interval by that much. Not a fault to warn of."""
    found = TARGET.search(str(row.get("stop_detail") or ""))
    width = row.get("stop_half_width")
    if found is None or width is None or pd.isna(width):
        return False
    goal = found.group(1)
    digits = len(goal.split(".")[1]) if "." in goal else 0
    return round(100 * float(width), digits) <= float(goal)


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
    close = wider & stopped.apply(_within_digit, axis=1).astype(bool) if len(stopped) else wider
    for level, these, how in (("warning", wider & ~close, "wider than it"),
                              ("note", close, "wider than it by less than the target's last "
                               "digit (the requests in flight at the stop, finished after it)")):
        if these.any():
            shown = "; ".join(f"{_name(r)} {str(r.stop_detail).removeprefix(WIDER + ' ')}"
                              for r in stopped[these].head(8).itertuples())
            out.append((level, f"{int(these.sum())} cell(s) stopped at their precision target "
                               f"with an interval over all their requests {how}: {shown}"))
    reached = stopped[~wider]
    if len(reached):
        out.append(("note", f"{len(reached)} cell(s) stopped at their precision target, "
                            f"{int(reached.requests_ok.fillna(0).sum())} requests in all"))
    return out
