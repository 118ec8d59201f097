"""The report's start-up section (grid/analysis/startup.py): per variant, how many server
starts the run made, how long they took (median and range) and the engine's own phases."""

from __future__ import annotations

from typing import Any

from grid.analysis.startup import startup_table
from grid.report.markup import esc
from grid.report.rundata import RunData

NOTE = ("total = seconds from the server process's start to its first ready answer (interpreter, "
        "the engine's phases, warm-up); phases = medians of the seconds the engine's log gives "
        "them, named as the engine names them (they may overlap)")


def _records(data: RunData) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in startup_table(data.cells).to_dict("records")]


def _phases(phases: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in phases.items()) or "-"


def lines(data: RunData) -> list[str]:
    """One line per variant (empty when no start was recorded)."""
    return [f"{r['variant']}: {r['starts']} start(s), {r['startup_s']:.1f} s median "
            f"[{r['startup_s_min']:.1f}, {r['startup_s_max']:.1f}]; phases (s): "
            f"{_phases(r['phases'])}" for r in _records(data)]


def section(data: RunData) -> str:
    """The text block."""
    found = lines(data)
    if not found:
        return ""
    label = f" [{data.label}]" if data.label else ""
    return "\n".join([f"server start-up per variant{label}:", *(f"  {x}" for x in found),
                      f"  ({NOTE})"])


def html_section(data: RunData) -> str:
    records = _records(data)
    if not records:
        return ""
    rows = "".join(
        f"<tr><td>{esc(r['variant'])}</td><td class=n>{r['starts']}</td>"
        f"<td class=n>{r['startup_s']:.1f}</td><td class=n>{r['startup_s_min']:.1f} – "
        f"{r['startup_s_max']:.1f}</td><td>{esc(_phases(r['phases']))}</td></tr>"
        for r in records)
    label = f" ({esc(data.label)})" if data.label else ""
    return (f"<h2>Server start-up per variant{label}</h2><p>What each start of a variant's "
            f"server costs (autoscaling pays it per new server): {esc(NOTE)}.</p>"
            "<table><tr><th>variant</th><th>starts</th><th>median s</th><th>range s</th>"
            f"<th>phases (median s)</th></tr>{rows}</table>")


def decision(data: RunData) -> list[dict[str, Any]]:
    """decision.json's `startup`: one entry per variant."""
    return [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
            for r in _records(data)]
