"""A capacity search's trace in the report (search.json): each step, the capacity with its
interval on the lattice, and whether the boundary is a cliff."""

from __future__ import annotations

from grid.questions.steps import step_lines, unfinished


def _found(trace: dict) -> str:
    res = trace["result"]
    low, high = res["interval"]
    if res["stop"] == "none served":
        return f"no load meets the SLOs (c={high} misses already)"
    if res["stop"] == "all served":
        return f"serves at least c={low}, the highest searched (not bracketed)"
    cliff = (f"; a cliff: c={high} serves {res['attainment'][str(high)]:.0%} of requests "
             "within the SLOs" if res["cliff"] else "")
    return f"serves up to c={low} within the SLOs (c={high} misses them){cliff}"


def trace_lines(trace: dict) -> list[str]:
    """One line per step and one for the outcome."""
    res = trace["result"]
    lines = [f"search: capacity of {trace['variant']} on {trace['workload']} (SLO attainment "
             f">= {trace['target']:.0%}), {res['cells']} of {res['max_cells']} cells (the "
             f"dense grid: {res['dense_cells']}), lattice {res['lattice'][0]}.."
             f"{res['lattice'][-1]}"]
    lines += step_lines(trace["steps"], lambda p: f"c={p[0]}")
    if res.get("stop") and res["stop"] != "budget":
        lines.append(f"  stopped: {res['stop']}; {trace['variant']} {_found(trace)}")
    else:
        lines.append(unfinished(res))
    return lines


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the capacity, with its interval and cliff."""
    res = trace["result"]
    if not res.get("stop") or res["stop"] == "budget":
        return None
    return (f"{trace['variant']} on {trace['workload']} {_found(trace)} (the capacity search, "
            f"{res['cells']} of {res['dense_cells']} cells)")
