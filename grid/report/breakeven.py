"""The report's break-even section: from a run's forced-acceptance cells, the accept length at
which each speculative configuration pays at each load (grid/analysis/breakeven.py), each forced
cell's check that the engine honoured it (grid/analysis/forced.py), and the user's drafter
placed on the curve from the same run's unforced cells, and from an earlier run's
(`breakeven.drafter_run`, `--drafter-run`, grid/analysis/drafter_run.py; labelled with its run
id): per prompt domain, the end of the range of loads from the lowest at which it pays, and
where its length lies beyond the lengths measured ("unknown above X"). From a ladder of drafters
(unforced), the same curve at their measured accept lengths, each rung's verdict by the curve
fitted without it beside the sign of its measured speedup (out of sample), and a ladder whose
rungs differ in shape refused in one line. Text, HTML, decision.json and a figure; all empty
without forced cells or a ladder. Forced lines carry the label "forced acceptance: performance
only"."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd
from matplotlib.figure import Figure

from grid.analysis.breakeven import Level, configuration, curves, ladder_refusals
from grid.analysis.breakeven import agrees as agrees_with
from grid.analysis.breakeven_cells import depth_of
from grid.analysis.breakeven_drafter import Drafter, drafters
from grid.analysis.drafter_run import placed_from
from grid.analysis.forced import FORCED_LABEL, TOLERANCE, forced_mask, honoured
from grid.report.rundata import RunData

RULE = ("break-even: the accept length (tokens per verify step) at which the configuration's "
        "output tok/s equals the baseline's at that load, interpolated between the decode "
        "accept lengths the honoured forced cells measured, 95 % bootstrap interval; the "
        "drafter pays where its own accept length (unforced cells of this run, or of the run "
        "named, per prompt domain) exceeds it, from the lowest load up to the first where it "
        "does not; beyond the lengths measured the answer is unknown")


@dataclass
class View:
    levels: list[Level]
    placed: list[Drafter]
    checks: pd.DataFrame
    note: str = ""
    """Why the drafter run given is not placed (no clear configuration, unreadable), or
    empty."""
    refusals: list[str] = field(default_factory=list)
    """Ladders not drawn, one line each (rungs of different shapes)."""


LADDER_RULE = ("ladder: drafters of graded quality at the same cost per draft pass, nothing "
               "forced; the break-even length interpolated between their measured accept "
               "lengths (each replicate's length drawn with its throughput); checked out of "
               "sample: each rung's verdict by the curve fitted without it, beside the sign of "
               "its measured speedup (95 % bootstrap)")


def view(data: RunData) -> View | None:
    """The section's numbers (None: the run has neither a forced cell nor a ladder)."""
    if data.cells.empty:
        return None
    forced = bool(forced_mask(data.cells).any())
    levels = curves(data.stats, data.cells, data.baseline)
    refusals = list(ladder_refusals(data.cells).values())
    if not forced and not levels and not refusals:
        return None
    placed = drafters(levels, data.requests, data.cells) if len(data.requests) else []
    note = data.drafter_note
    if data.drafter_run is not None:
        try:
            placed += placed_from(levels, data.drafter_run)
        except ValueError as e:
            note = str(e)
    return View(levels, placed, honoured(data.cells), note, refusals)


def forced_configurations(cells: pd.DataFrame) -> list[tuple[str, int | None]]:
    """The configurations of a run's forced cells, each with the speculative depth its cells
    were served at (None: not recorded): what a drafter run is placed against."""
    if cells.empty:
        return []
    forced = cells[forced_mask(cells)]
    configs = forced.variant.astype(str).map(configuration)
    return [(c, depth_of(forced[configs == c])) for c in sorted(set(configs))]


def _title(data: RunData, v: View) -> str:
    label = f", {data.label}" if data.label else ""
    kinds = ({lv.kind for lv in v.levels} | ({"forced"} if len(v.checks) else set())
             | ({"ladder"} if v.refusals else set()))
    words = "; ".join({"forced": FORCED_LABEL, "ladder": "drafter ladder, real acceptance"}[k]
                       for k in sorted(kinds))
    return f"break-even acceptance ({words}{label})"


def _rung_lines(lv: Level) -> list[str]:
    if lv.kind != "ladder":
        return []
    out = []
    for variant, length, (alo, ahi), ratio, (lo, hi), held in zip(
            lv.rungs, lv.lengths, lv.rung_lengths, lv.ratios, lv.rung_ratios,
            lv.held_out_verdicts, strict=True):
        agrees = agrees_with(held, (lo, hi))
        sign = ("no sign (interval holds 1)" if (lo <= 1.0 <= hi) else "no verdict to compare"
                if agrees is None else "agrees with its speedup" if agrees
                else "DISAGREES with its speedup")
        out.append(f"      {variant}: accept length {length:.2f} [{alo:.2f}, {ahi:.2f}], "
                   f"x{ratio:.2f} [{lo:.2f}, {hi:.2f}]; without it the curve says "
                   f"{held}: {sign}")
    return out


def held_out_total(levels: list[Level]) -> dict[str, int]:
    """`Level.held_out` summed over the ladder levels."""
    total = {"agree": 0, "disagree": 0, "no_sign": 0, "unknown": 0}
    for lv in levels:
        for k, n in (lv.held_out() if lv.kind == "ladder" else {}).items():
            total[k] += n
    return total


def held_out_line(levels: list[Level]) -> str:
    """The out-of-sample check of a ladder's levels, summed: how many rungs' held-out
    verdicts agree with the sign of their measured speedup."""
    total = held_out_total(levels)
    signed = total["agree"] + total["disagree"]
    return (f"held out (each rung's verdict by the curve without it): agrees with the measured "
            f"speedup's sign at {total['agree']} of {signed} rungs; {total['no_sign']} with no "
            f"sign (interval holds 1), {total['unknown']} beyond the other rungs' lengths "
            "(unknown)")


def answer(data: RunData) -> str | None:
    """The break-even curve in one sentence, what a run that measured one asked (None: no
    curve): per configuration and workload, the accept length a drafter must beat per load."""
    v = view(data)
    if v is None or not v.levels:
        return None
    parts = [f"the accept length {config} must beat on {workload}: "
             + ", ".join(f"c={lv.load:g} {lv.describe()}" for lv in group)
             + (" (a ladder of drafters)" if kind == "ladder" else "")
             for (kind, config, workload), group in _by_curve(v.levels).items()]
    return "break-even: " + "; ".join(parts)


def section(data: RunData) -> str:
    """The text block."""
    v = view(data)
    if v is None:
        return ""
    lines = [_title(data, v)]
    for (kind, config, workload), group in _by_curve(v.levels).items():
        lines.append(f"  {config} on {workload} against {data.baseline}"
                     + (" (ladder):" if kind == "ladder" else ":"))
        for lv in group:
            lines.append(f"    c={lv.load:g}: {lv.describe()}")
            lines += _rung_lines(lv)
        if kind == "ladder":
            lines.append(f"    {held_out_line(group)}")
        lines += [f"    drafter on {d.describe()}" for d in v.placed
                  if kind == "forced" and (d.configuration, d.workload) == (config, workload)]
    lines += [f"  {line}" for line in v.refusals]
    if v.note:
        lines.append(f"  drafter run not placed: {v.note}")
    if not v.levels:
        lines.append("  no curve: a load needs the baseline and two honoured forced lengths "
                     "or ladder rungs")
    if len(v.checks):
        flagged = v.checks[~v.checks.honoured.astype(bool)]
        lines.append(f"  honoured: {len(v.checks) - len(flagged)} of {len(v.checks)} forced "
                     f"cells within ±{TOLERANCE:.0%} of the forced length")
        lines += [f"  FLAGGED {r.variant} c={r.concurrency}: {r.statement}; left out of the "
                  "curve" for r in flagged.itertuples()]
        lines.append(f"  ({RULE}; forced cells are left out of the recommendation and the "
                     "losslessness check)")
    if any(lv.kind == "ladder" for lv in v.levels):
        lines.append(f"  ({LADDER_RULE})")
    return "\n".join(lines)


def _by_curve(levels: list[Level]) -> dict[tuple[str, str, str], list[Level]]:
    out: dict[tuple[str, str, str], list[Level]] = {}
    for lv in levels:
        out.setdefault((lv.kind, lv.configuration, lv.workload), []).append(lv)
    return out


def html_section(data: RunData) -> str:
    """The HTML block (empty as `section`)."""
    v = view(data)
    if v is None:
        return ""
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(lv.configuration)}</td><td>{esc(lv.kind)}</td><td>{esc(lv.workload)}</td>"
        f"<td class=n>c={lv.load:g}</td><td class=n>{esc(lv.describe())}</td></tr>"
        + "".join(f"<tr><td colspan=5>{esc(line.strip())}</td></tr>"
                  for line in _rung_lines(lv))
        for lv in v.levels)
    placed = "".join(f"<li>{esc(d.configuration)} on {esc(d.workload)}, {esc(d.describe())}"
                     "</li>" for d in v.placed)
    checks = "".join(
        f"<li>{esc(str(r.variant))} c={r.concurrency}: "
        + (esc(str(r.statement)) if r.honoured
           else f"<b class=warning>{esc(str(r.statement))}</b>")
        + "</li>" for r in v.checks.itertuples())
    forced_ = len(v.checks) > 0
    kinds = {lv.kind for lv in v.levels}
    rules = ([RULE] if forced_ or "forced" in kinds else []) + (
        [LADDER_RULE] if "ladder" in kinds else [])
    return (f"<h2>{esc(_title(data, v))}</h2>"
            + "".join(f"<p>{esc(rule)}.</p>" for rule in rules)
            + f"<table><tr>"
            f"<th>configuration</th><th>kind</th><th>workload</th><th>load</th>"
            f"<th>break-even length [95 %]</th></tr>{rows}</table>"
            + (f"<p>The drafter per prompt domain (pays up to [surely, maybe]):</p>"
               f"<ul>{placed}</ul>" if placed else "")
            + "".join(f"<p class=warning>{esc(line)}</p>" for line in v.refusals)
            + "".join(f"<p>{esc(held_out_line(g))} ({esc(k[1])} on {esc(k[2])})</p>"
                      for k, g in _by_curve(v.levels).items() if k[0] == "ladder")
            + (f"<p class=warning>Drafter run not placed: {esc(v.note)}</p>" if v.note else "")
            + (f"<p>Honoured (±{TOLERANCE:.0%}):</p><ul>{checks}</ul>" if forced_ else ""))


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
            **({"drafter_run": {"run": data.drafter_run.run_id, "path": data.drafter_run.path}}
               if data.drafter_run is not None else {}),
            **({"drafter_run_note": v.note} if v.note else {}),
            "refused": v.refusals,
            **({"held_out": held_out_total(v.levels)} if ladder else {}),
            **({"honoured": [
                {**{k: (None if pd.isna(r[k]) else r[k]) if k != "honoured" else bool(r[k])
                    for k in ("cell_id", "variant", "concurrency", "forced_length",
                              "measured_length", "difference", "honoured", "statement")},
                 "in_curve": bool(r["honoured"])} for r in v.checks.to_dict("records")]}
               if forced_ else {})}


def figure(data: RunData) -> Figure | None:
    """Break-even length against load per configuration (95 % band), with the drafter's
    accept length per domain as horizontal bands."""
    v = view(data)
    if v is None or not v.levels:
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for (kind, config, workload), group in _by_curve(v.levels).items():
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
                ax.annotate(f"{d.name} {d.length:.2f}", (loads[0], d.length), fontsize=7,
                            xytext=(2, 2), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("break-even accept length")
    title = f"{_title(data, v)}: pays above the curve"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig
