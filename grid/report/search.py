"""The adaptive search's trace in the report (docs/search.md): each step, why it was taken and
what it measured, and why the search stopped, from the run folder's `search.json` (written by
grid/execute/search.py after every step)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

TRACE_FILE = "search.json"


def load_trace(run_dir: Path) -> dict | None:
    """The run's search trace, or None for a run without a search (or an unreadable trace)."""
    path = Path(run_dir) / TRACE_FILE
    try:
        trace = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return trace if isinstance(trace, dict) and "steps" in trace else None


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
    res = trace["result"]
    lines = [f"search: crossover of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']}, {res['cells']} of {res['max_cells']} cells "
             f"(lattice {res['lattice'][0]}..{res['lattice'][-1]})"]
    for step in trace["steps"]:
        points = ", ".join(f"c={c}" + (f" repeat {r}" if r else "") for c, r in step["points"])
        lines.append(f"  step {step['number']}: {step['why']}"
                     + (f" -> measures {points}" if points else ""))
    stop = res.get("stop")
    if stop:
        lines.append(f"  stopped: {stop} ({res['stop_meaning']}); crossover "
                     f"{_bracket(res['bracket'])}")
    else:
        lines.append(f"  not finished: {res.get('note') or 'the last step is still to run'}")
    return lines


def trace_section(trace: dict | None) -> str:
    """The HTML section (empty without a search)."""
    if trace is None:
        return ""
    lines = trace_lines(trace)
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
    return f"<h2>Adaptive search</h2><p>{escape(lines[0])}</p><ol>{items}</ol>"
