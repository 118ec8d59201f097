"""The report's break-even section (docs/report.md "Break-even acceptance"): text, HTML,
decision.json and a figure, all empty without forced cells or a ladder."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from itertools import groupby

import pandas as pd
from matplotlib.figure import Figure

from grid.analysis.breakeven import Level, curves, held_out
from grid.analysis.breakeven_cells import ladder_refusals
from grid.analysis.breakeven_drafter import Drafter, drafters
from grid.analysis.forced import FORCED_LABEL, TOLERANCE, forced_mask, honoured
from grid.report.rundata import RunData

RULE = ("break-even: the accept length (tokens per verify step) at which the configuration's "
        "output tok/s equals the baseline's at that load, interpolated between the decode "
        "accept lengths the honoured forced cells measured, 95 % bootstrap interval; the "
        "drafter pays where its own accept length (this run's unforced cells, per prompt "
        "domain) exceeds it, from the lowest load up to the first where it "
        "does not; beyond the lengths measured the answer is unknown")


@dataclass
class View:
    levels: list[Level]
    placed: list[Drafter]
    checks: pd.DataFrame
    refusals: list[str] = field(default_factory=list)
    """Ladders not drawn, one line each (rungs of different shapes)."""


LADDER_RULE = ("ladder: drafters of graded quality at the same cost per draft pass, nothing "
               "forced; the break-even length interpolated between their measured accept "
               "lengths (each replicate's length drawn with its throughput); checked out of "
               "sample: each rung's verdict by the curve fitted without it, beside the sign of "
               "its measured speedup (95 % bootstrap)")


def view(data: RunData) -> View | None:
    """The section's numbers (None: the run has neither a forced cell nor a ladder)."""
    forced = bool(forced_mask(data.cells).any())
    levels = curves(data.stats, data.cells, data.baseline)
    refusals = list(ladder_refusals(data.cells).values())
    if not forced and not levels and not refusals:
        return None
    placed = drafters(levels, data.requests, data.cells) if len(data.requests) else []
    return View(levels, placed, honoured(data.cells), refusals)


def _title(data: RunData, v: View) -> str:
    label = f", {data.label}" if data.label else ""
    kinds = ({lv.kind for lv in v.levels} | ({"forced"} if len(v.checks) else set())
             | ({"ladder"} if v.refusals else set()))
    words = "; ".join({"forced": FORCED_LABEL, "ladder": "drafter ladder, real acceptance"}[k]
                       for k in sorted(kinds))
    return f"break-even acceptance ({words}{label})"


def _rung_lines(lv: Level) -> list[str]:
    out = []
    for r in lv.rung_rows() if lv.kind == "ladder" else []:
        (alo, ahi), (lo, hi), agrees = (r["accept_length_interval"], r["ratio_interval"],
                                        r["held_out_agrees"])
        sign = ("no sign (interval holds 1)" if (lo <= 1.0 <= hi) else "no verdict to compare"
                if agrees is None else "agrees with its speedup" if agrees
                else "DISAGREES with its speedup")
        out.append(f"      {r['variant']}: accept length {r['accept_length']:.2f} [{alo:.2f}, "
                   f"{ahi:.2f}], x{r['ratio']:.2f} [{lo:.2f}, {hi:.2f}]; without it the curve "
                   f"says {r['held_out_verdict']}: {sign}")
    return out


def answer(data: RunData) -> str | None:
    """The break-even curve in one sentence (None: no curve)."""
    v = view(data)
    if v is None or not v.levels:
        return None
    parts = [f"the accept length {config} must beat on {workload}: "
             + ", ".join(f"c={lv.load:g} {lv.describe()}" for lv in group)
             + (" (a ladder of drafters)" if kind == "ladder" else "")
             for (kind, config, workload), group in _by_curve(v.levels)]
    return "break-even: " + "; ".join(parts)


def section_lines(data: RunData) -> list[tuple[str, bool]]:
    """The section's lines, each with whether it warns (empty without a curve or forced cell)."""
    v = view(data)
    if v is None:
        return []
    out = [(_title(data, v), False)]
    for (kind, config, workload), group in _by_curve(v.levels):
        out.append((f"  {config} on {workload} against {data.baseline}"
                    + (" (ladder):" if kind == "ladder" else ":"), False))
        for lv in group:
            out += [(line, False) for line in [f"    c={lv.load:g}: {lv.describe()}",
                                               *_rung_lines(lv)]]
        if kind == "ladder":
            n = held_out(group)
            out.append((f"    held out (each rung's verdict by the curve without it): agrees "
                        f"with the measured speedup's sign at {n['agree']} of "
                        f"{n['agree'] + n['disagree']} rungs; {n['no_sign']} with no sign "
                        f"(interval holds 1), {n['unknown']} beyond the other rungs' lengths "
                        "(unknown)", False))
        out += [(f"    drafter on {d.describe()}", False) for d in v.placed
                if kind == "forced" and (d.configuration, d.workload) == (config, workload)]
    out += [(f"  {line}", True) for line in v.refusals]
    if not v.levels:
        out.append(("  no curve: a load needs the baseline and two honoured forced lengths "
                    "or ladder rungs", False))
    if len(v.checks):
        flagged = v.checks[~v.checks.honoured.astype(bool)]
        out.append((f"  honoured: {len(v.checks) - len(flagged)} of {len(v.checks)} forced "
                    f"cells within ±{TOLERANCE:.0%} of the forced length", False))
        out += [(f"  FLAGGED {r.variant} c={r.concurrency}: {r.statement}; left out of the "
                 "curve", True) for r in flagged.itertuples()]
        out.append((f"  ({RULE}; forced cells are left out of the recommendation and the "
                    "losslessness check)", False))
    if any(lv.kind == "ladder" for lv in v.levels):
        out.append((f"  ({LADDER_RULE})", False))
    return out


def section(data: RunData) -> str:
    """The text block."""
    return "\n".join(line for line, _ in section_lines(data))


def html_section(data: RunData) -> str:
    """The HTML block: the text's lines, indented as there, the warnings marked."""
    found = section_lines(data)
    if not found:
        return ""
    items = "".join(f"<li style='margin-left:{len(line) - len(line.lstrip()) - 2}ex'"
                    f"{' class=warning' if warns else ''}>{html.escape(line.strip())}</li>"
                    for line, warns in found[1:])
    return f"<h2>{html.escape(found[0][0])}</h2><ul>{items}</ul>"


def _by_curve(levels: list[Level]) -> list[tuple[tuple[str, str, str], list[Level]]]:
    """The levels (sorted by `curves`) per (kind, configuration, workload)."""
    return [(k, list(g)) for k, g in groupby(levels, lambda lv: (lv.kind, lv.configuration,
                                                                 lv.workload))]


def decision(data: RunData) -> dict[str, object]:
    """decision.json's `breakeven` (empty without forced cells)."""
    v = view(data)
    if v is None:
        return {}
    forced_ = len(v.checks) > 0 or any(lv.kind == "forced" for lv in v.levels)
    ladder = any(lv.kind == "ladder" for lv in v.levels)
    return {**({"label": FORCED_LABEL, "rule": RULE, "tolerance": TOLERANCE} if forced_ else {}),
            **({"ladder_rule": LADDER_RULE} if ladder else {}),
            "curves": [{"configuration": lv.configuration, "workload": lv.workload,
                        **lv.as_json()} for lv in v.levels],
            **({"drafter": [d.as_json() for d in v.placed]} if v.placed or forced_ else {}),
            "refused": v.refusals,
            **({"held_out": held_out(v.levels)} if ladder else {}),
            **({"honoured": [
                {**{k: (None if pd.isna(r[k]) else r[k]) if k != "honoured" else bool(r[k])
                    for k in ("cell_id", "variant", "concurrency", "forced_length",
                              "measured_length", "difference", "honoured", "statement")},
                 "in_curve": bool(r["honoured"])} for r in v.checks.to_dict("records")]}
               if forced_ else {})}


def figure(data: RunData) -> Figure | None:
    """Break-even length against load per configuration, the drafter's length as bands."""
    v = view(data)
    if v is None or not v.levels:
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for (kind, config, workload), group in _by_curve(v.levels):
        loads = [lv.load for lv in group]
        line = ax.plot(loads, [lv.value for lv in group], marker="o",
                       label=f"{config} / {workload}" + (" (ladder)" if kind == "ladder"
                                                         else ""))[0]
        ax.fill_between(loads, [lv.lo for lv in group], [lv.hi for lv in group],
                        color=line.get_color(), alpha=0.2)
        for where, marker, words in (("above", "^", "at or above: pays at no length"),
                                     ("below", "v", "at or below: pays at every length")):
            ends = [lv for lv in group if lv.where == where]
            if ends:  # a bound, not a crossing: the lengths measured end there
                ax.scatter([lv.load for lv in ends], [lv.value for lv in ends], marker=marker,
                           s=80, color=line.get_color(), zorder=3, label=words)
        for d in v.placed:
            if kind == "forced" and (d.configuration, d.workload) == (config, workload):
                ax.axhspan(d.lo, d.hi, color=line.get_color(), alpha=0.12)
                ax.axhline(d.length, color=line.get_color(), linestyle=":", linewidth=1)
                ax.annotate(f"{d.domain} {d.length:.2f}", (loads[0], d.length), fontsize=7,
                            xytext=(2, 2), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="concurrency", ylabel="break-even accept length")
    ax.set_title(f"{_title(data, v)}: pays above the curve", fontsize=9)
    ax.legend(fontsize=7)
    return fig
