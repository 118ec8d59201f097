"""The adaptive search's trace in the report (docs/search.md): each step, why it was taken and
what it measured, and why the search stopped, from the run folder's `search.json` (written by
grid/execute/search.py after every step)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from grid.analysis.threshold import describe_point
from grid.report.breakeven import trace_lines as breakeven_trace_lines
from grid.report.depth import depth_lines, depth_section
from grid.report.steps import step_lines, unfinished

TRACE_FILE = "search.json"


def load_trace(run_dir: Path) -> dict | None:
    """The run's search trace, or None for a run without a search (or an unreadable trace)."""
    path = Path(run_dir) / TRACE_FILE
    try:
        trace = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return trace if isinstance(trace, dict) and "steps" in trace else None


def searched_recommendations(recs: list[dict], trace: dict | None) -> list[dict]:
    """A threshold search's confirmed value replaces the crossover rule's recommendation for
    its variant and workload (the rule's value kept as `crossover_rule`): it was measured on
    the engine's own threshold, where the rule only reads the lattice's levels."""
    if not trace or trace.get("kind") != "threshold":
        return recs
    res = trace["result"]
    if not res.get("threshold_stop"):
        return recs
    value = res.get("threshold")
    signs: dict[str, str] = next((s.get("signs") for s in reversed(trace["steps"])
                                  if s.get("phase") == "confirm" and s.get("signs")), {})
    measured = "; ".join(
        f"{pair.replace('->', ' vs ')}: {'higher' if sign.startswith('+') else 'lower'} wins"
        + ("" if sign in ("+", "-") else " (point estimate)") for pair, sign in signs.items())
    key = (trace["variant"], trace["workload"])
    old = next((r for r in recs if (r["variant"], r["workload"]) == key), None)
    rule = None if old is None else old.get("speculative_disable_above_batch")
    text = ("no threshold needed within the searched range" if value is None else
            "keep speculation off (speculative_disable_above_batch=0)" if value == 0 else
            f"set speculative_disable_above_batch={value}")
    statement = (f"{text}: the threshold search's choice ({res['threshold_stop']}"
                 + (f"; {measured}" if measured else "") + ")"
                 + (f"; the crossover rule alone says {rule}" if rule != value else ""))
    new = {**(old or {"variant": key[0], "workload": key[1]}),
           "speculative_disable_above_batch": value, "statement": statement,
           "source": "threshold search", "crossover_rule": rule}
    return [new if r is old else r for r in recs] + ([] if old is not None else [new])


def _bracket(bracket: list) -> str:
    low, high = bracket
    if low is None and high is None:
        return "not yet"
    if high is None:
        return f"pays up to c={low}"
    if low is None:
        return f"stops paying at c={high}"
    return f"between c={low} and c={high}"


def trace_lines(trace: dict) -> list[str]:
    """One line per step and one for the outcome."""
    if trace.get("kind") == "depth":  # a depth search: grid/report/depth.py
        return depth_lines(trace)
    if trace.get("kind") == "breakeven":  # grid/report/breakeven.py
        return breakeven_trace_lines(trace)
    res = trace["result"]
    lines = [f"search: {trace.get('kind', 'crossover')} of {trace['variant']} vs "
             f"{trace['baseline']} on {trace['workload']}, {res['cells']} of "
             f"{res['max_cells']} cells (lattice {res['lattice'][0]}..{res['lattice'][-1]})"]
    lines += step_lines(trace["steps"], describe_point)
    stop = res.get("stop")
    if stop:
        lines.append(f"  stopped: {stop} ({res['stop_meaning']}); crossover "
                     f"{_bracket(res['bracket'])}")
    else:
        lines.append(unfinished(res))
    if res.get("prior"):
        lines += prior_lines(res["prior"])
    if trace.get("kind") == "threshold" and res.get("threshold_stop"):
        value = res.get("threshold")
        answer = ("no threshold needed within the range" if value is None else
                  "keep speculation off (0)" if value == 0 else
                  f"set speculative_disable_above_batch={value}")
        lines.append(f"  threshold: {answer} ({res['threshold_stop']}: "
                     f"{res['threshold_stop_meaning']})")
    return lines


def prior_lines(prior: dict) -> list[str]:
    """What the twin asked first predicted, against what the search then measured."""
    low, high = prior["predicted_bracket"]
    said = (f"the crossover {_bracket([low, high])}" if low is not None and high is not None
            else f"that speculation {_bracket([low, high])}")
    head = f"  prior: {prior['source']} predicted {said}; the search measured there first"
    rows = [f"c={r['load']} predicted {r['predicted']:+.1%}, measured {r['measured']:+.1%} "
            f"[{r['interval'][0]:+.1%}, {r['interval'][1]:+.1%}]"
            + ("" if r["inside"] else " (outside)") for r in prior["levels"]]
    if not rows:
        return [head]
    error = prior["mean_abs_error"]
    return [head, f"    at the measured levels: {'; '.join(rows)}; mean |error| "
                  f"{100 * error:.1f} points of speedup"]


def trace_section(trace: dict | None) -> str:
    """The HTML section (empty without a search)."""
    if trace is None:
        return ""
    if trace.get("kind") == "depth":
        return depth_section(trace)
    lines = trace_lines(trace)
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
    return f"<h2>Adaptive search</h2><p>{escape(lines[0])}</p><ol>{items}</ol>"
