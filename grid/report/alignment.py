"""The report's view of alignment against measured acceptance (grid/analysis/lesson.py): a
table of accept length with intervals per workload, the rank correlation, and a scatter of
accept length against alignment with the intervals as error bars, one series per speculative
variant and temperature. Shown when, at one load, a speculative variant was measured on two
or more workloads with a known alignment and per-request verify counts: a relation needs
workloads to compare (a one-workload sweep has its accept length in the main table)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

import engines
from grid.analysis.lesson import relation_lines, relations
from grid.report.rundata import RunData


def compared(data: RunData) -> pd.DataFrame:
    """The acceptance rows of (variant, temperature, load) groups with two or more
    workloads."""
    t = data.acceptance
    if t.empty:
        return t
    keys = ["variant", "temperature", "concurrency"]
    counts = t.groupby(keys, dropna=False).workload.transform("nunique")
    return t[counts >= 2]


def section(data: RunData) -> str:
    """The text block (empty when nothing was measured against a known alignment)."""
    t = compared(data)
    if t.empty:
        return ""
    label = f" [{data.label}]" if data.label else ""
    wide = max(12, *(len(str(w)) for w in t.workload))
    lines = [f"accept length (decode-only, 95 % interval over requests) against alignment with "
             f"the drafter's training data{label}:",
             f"  {'variant':<20} {'temp':>5} {'c':>4} {'workload':<{wide}} {'n':>4} "
             f"{'accept':>7} {'interval':>14} {'alignment':>10}"]
    for _, r in t.sort_values(["variant", "temperature", "concurrency", "alignment"],
                              ascending=[True, True, True, False]).iterrows():
        temp = "-" if r.temperature is None else f"{r.temperature:g}"
        lines.append(f"  {r.variant:<20} {temp:>5} {r.concurrency!s:>4} {r.workload:<{wide}} "
                     f"{r.requests:>4} {r.accept_length:>7.2f} "
                     f"{f'[{r.lo:.2f}, {r.hi:.2f}]':>14} {r.alignment:>10.2f}")
    lines += [f"  {line}" for line in relation_lines(t)]
    if not data.simulated:
        lines += [f"  note: {line}" for line in simulator_contrast(t)]
    return "\n".join(lines)


def simulator_contrast(t) -> list[str]:
    """Where a real engine's acceptance disagrees with the simulator's drafter model (the
    engine whose `alignment_acceptance` models acceptance from alignment): it gives every
    prompt at or below its floor the same off-distribution acceptance. Per variant and
    temperature: if, among workloads whose mean alignment is at or below that floor, the best
    accepting one is the more aligned and its interval is apart from the worst's, acceptance
    rises with alignment where the simulator has it flat; said with the numbers, never tuned
    away."""
    modelled = [model.alignment_acceptance for model in map(engines.modeller, engines.names())
                if model is not None]
    if not modelled:
        return []
    floor, full = modelled[0]
    out = []
    low = t[t.alignment <= floor]
    for (variant, temperature), group in low.groupby(["variant", "temperature"], dropna=False):
        hi, lo = group.loc[group.accept_length.idxmax()], group.loc[group.accept_length.idxmin()]
        if hi.lo > lo.hi and hi.alignment > lo.alignment:  # rises with alignment, apart
            temp = "" if temperature != temperature else f" at temperature {temperature:g}"
            out.append(
                f"{variant}{temp}: the simulator's drafter gives every prompt at alignment <= "
                f"{floor} the same off-distribution acceptance (full from "
                f"{full}); measured here, workloads below that floor range from "
                f"{hi.workload} ({hi.alignment:.2f}) {hi.accept_length:.2f} [{hi.lo:.2f}, "
                f"{hi.hi:.2f}] to {lo.workload} ({lo.alignment:.2f}) {lo.accept_length:.2f} "
                f"[{lo.lo:.2f}, {lo.hi:.2f}], intervals apart: the real drafter separates text "
                "the simulator treats as unrelated (docs/simulator.md)")
    return out


def decision(data: RunData) -> list[dict[str, object]]:
    """decision.json's `alignment_vs_acceptance`: per variant and temperature."""
    t = compared(data)
    return relations(t) if not t.empty else []


def figure(data: RunData) -> Figure | None:
    t = compared(data)
    if t.empty:
        return None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    rho = {(r["variant"], r["temperature"]): r["spearman"] for r in relations(t)}
    for (variant, temperature), group in t.groupby(["variant", "temperature"], dropna=False):
        known = temperature is not None and temperature == temperature
        temp = f", T={temperature:g}" if known else ""
        r = rho.get((str(variant), temperature if known else None))  # equal floats, equal keys
        yerr = [group.accept_length - group.lo, group.hi - group.accept_length]
        ax.errorbar(group.alignment, group.accept_length, yerr=yerr, fmt="o", capsize=3,
                    label=f"{variant}{temp}" + ("" if r is None else f" (Spearman {r:+.2f})"))
        for _, row in group.iterrows():
            ax.annotate(str(row.domain or row.workload), (row.alignment, row.accept_length),
                        fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("alignment with the drafter's training data (0 = unrelated, 1 = typical row)")
    ax.set_ylabel("accept length (tokens per verify step)")
    prefix = f"{data.label}: " if data.label else ""
    ax.set_title(f"{prefix}acceptance against alignment (95 % intervals)", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return fig
