"""A break-even search's trace in the report (search.json): each step, why it stopped, and
the break-even accept length bracketed at each load."""

from __future__ import annotations

from grid.analysis.forced import FORCED_LABEL
from grid.questions.steps import step_lines, unfinished


def _brackets(res: dict) -> str:
    return "; ".join(
        f"c={c} " + (f"between {lo:g} and {hi:g}" if where == "inside" else
                     f"at or below {hi:g}" if where == "below" else f"at or above {lo:g}")
        for c, (lo, hi, where) in res["brackets"].items())


def trace_lines(trace: dict) -> list[str]:
    """A break-even search's steps and outcome (search.json, BreakevenPlanned.trace)."""
    res, lengths = trace["result"], trace["lengths"]

    def point(p: list[int]) -> str:
        return f"c={p[0]} " + ("baseline" if p[1] < 0 else f"length {lengths[p[1]]:g}")

    lines = [f"search: break-even of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']} ({FORCED_LABEL}), {res['cells']} of {res['max_cells']} "
             f"cells (the dense grid: {res['dense_cells']}), loads "
             f"{trace['loads'][0]}..{trace['loads'][-1]}"]
    lines += step_lines(trace["steps"], point)
    if res.get("stop"):
        lines.append(f"  stopped: {res['stop']}; break-even {_brackets(res)}")
    else:
        lines.append(unfinished(res))
    return lines


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the break-even curve, load by load."""
    res = trace["result"]
    if not res.get("stop"):
        return None
    return (f"{trace['variant']} vs {trace['baseline']} on {trace['workload']}: speculation "
            f"breaks even at an accept length {_brackets(res)} (the break-even search, "
            f"{res['cells']} of {res['dense_cells']} dense cells, {FORCED_LABEL})")
