"""A capacity search's trace in the report (search.json): each step, each measured load's
attainment with its interval and verdict, the capacity with its interval on the lattice (and
the undecided loads in it), and whether the boundary is a cliff."""

from __future__ import annotations

from grid.questions.steps import step_lines, unfinished


def _c(load: int | None) -> str:
    return "none" if load is None else f"c={load}"


def _found(trace: dict) -> str:
    res = trace["result"]
    low, top = res["interval"]
    cap, miss = res["capacity"], res["first_miss"]
    if cap is None:
        head = "holds the SLOs at no load searched"
    elif res["stop"] == "all served":
        head = f"serves at least c={cap} within the SLOs, the highest searched (not bracketed)"
    else:
        head = f"serves up to c={cap} within the SLOs"
    notes = [f"undecided at {', '.join(_c(x) for x in res['undecided'])}"] if res[
        "undecided"] else []
    if res["unmeasured"]:
        notes.append(f"{res['unmeasured']} of its loads not measured")
    span = f"interval {_c(low)} .. {_c(top)}" + "".join(f", {n}" for n in notes)
    where = f"c={miss} misses them" if miss is not None else "no load searched misses them"
    cliff = (f"; a cliff: c={miss} serves {res['attainment'][str(miss)]['attainment']:.0%} of "
             "requests within the SLOs" if res["cliff"] else "")
    return f"{head} ({span}; {where}){cliff}"


def _measured(res: dict) -> str:
    parts = []
    for load, a in res["attainment"].items():
        lo, hi = a["interval"]
        value = "-" if a["attainment"] is None else f"{a['attainment']:.0%}"
        parts.append(f"c={load} {value} [{lo:.0%}, {hi:.0%}] of {a['requests']} {a['verdict']}")
    return "  attainment (95 % interval, steady-window requests): " + "; ".join(parts)


def trace_lines(trace: dict) -> list[str]:
    """One line per step, one with each measured load's attainment, one for the outcome."""
    res = trace["result"]
    lines = [f"search: capacity of {trace['variant']} on {trace['workload']} (SLO attainment "
             f">= {trace['target']:.0%}), {res['cells']} of {res['max_cells']} cells (the "
             f"dense grid: {res['dense_cells']}), lattice {res['lattice'][0]}.."
             f"{res['lattice'][-1]}"]
    lines += step_lines(trace["steps"], lambda p: f"c={p[0]}")
    if res["attainment"]:
        lines.append(_measured(res))
    if res.get("stop") == "budget":
        lines.append(f"  stopped: budget; so far {trace['variant']} {_found(trace)}")
    elif res.get("stop"):
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
