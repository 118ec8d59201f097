"""The servers' gauges over each cell, one panel per role (running batch, queue, KV-cache use)
whatever the engine calls them (grid/report/serverdata.py), so an SGLang and a vLLM run draw
the same figure. A cell whose server was never scraped inside its load window (a short cell
between two scrapes) is not drawn: its flat idle gauges would read as a server doing nothing
under load; each panel names those cells instead."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from grid.report.forced import forced_variants, legend
from grid.report.rundata import RunData
from grid.report.serverdata import GAUGES, unsampled

NO_SAMPLE = "no sample inside the load window"


def server_metrics(data: RunData) -> Figure | None:
    """Each gauge role over each cell (seconds since the cell's first scrape), one line per
    cell coloured by variant; None when no cell's server exposed one."""
    m = data.server_gauges
    if m.empty:
        return None
    roles = [r for r in GAUGES if (m.role == r).any()]
    missing = unsampled(m, data.requests)
    note = _missing_note(data, missing)
    m = m[~m.cell_id.astype(str).isin(missing)]
    fig = Figure(figsize=(11, 2.6 * len(roles)), layout="constrained")
    axes = fig.subplots(len(roles), 1, squeeze=False)
    variants = sorted(m.variant.astype(str).unique())
    colours = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    forced = forced_variants(data.cells) & set(variants)  # dotted (grid/report/forced.py)
    start = m.groupby("cell_id").scraped_at.min()
    for ax, role in zip((a[0] for a in axes), roles, strict=True):
        lines, colors, styles = [], [], []
        for cell_id, group in m[m.role == role].groupby("cell_id", sort=False):
            group = group.sort_values("scraped_at")
            lines.append(np.column_stack([group.scraped_at - start[cell_id], group.value]))
            colors.append(colours[str(group.variant.iloc[0])])
            styles.append(":" if str(group.variant.iloc[0]) in forced else "-")
        # One collection per panel: hundreds of cells draw as fast as one line.
        ax.add_collection(LineCollection(lines, colors=colors, linestyles=styles,
                                         linewidths=0.8, alpha=0.7))
        ax.autoscale()
        if note:
            ax.text(0.01, 0.97, note, transform=ax.transAxes, fontsize=7, va="top",
                    color="#8a1c00", wrap=True)
        ax.set_ylabel(GAUGES[role], fontsize=8)
        ax.grid(True, alpha=0.3)
    for v in variants:
        axes[0][0].plot([], [], ":" if v in forced else "-", color=colours[v], label=v)
    if variants:
        legend(axes[0][0], bool(forced), fontsize=7, ncol=min(4, len(variants) + bool(forced)),
               loc="upper right")
    axes[-1][0].set_xlabel("seconds since the cell's first scrape")
    return fig


def _missing_note(data: RunData, missing: list[str]) -> str:
    """`no sample inside the load window: baseline c=4, eagle3 c=4 (not drawn)`."""
    if not missing:
        return ""
    wanted = set(missing)
    names = []
    for row in data.cells.to_dict("records"):
        if str(row["cell_id"]) not in wanted:
            continue
        load = (f"c={int(row['concurrency'])}" if pd.notna(row.get("concurrency"))
                else f"{float(row['rate']):g}/s")
        names.append(f"{row['variant']} {load}")
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"{NO_SAMPLE}: {shown} (not drawn)"
