"""The operator's figure: output tok/s per user against output tok/s per GPU, one line per
variant across its concurrencies, each workload's Pareto frontier and each variant's capacity
(docs/report.md, `frontier`). A point's 95 % interval is a segment along the ray from the
origin: per user and per GPU are the same output tok/s divided by two constants of the cell."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from grid.analysis.setups import SEP
from grid.report.rundata import RunData


def _title(data: RunData, title: str) -> str:
    return f"{data.label} — {title}" if data.label else title


def frontier(data: RunData) -> Figure | None:
    """One panel per workload (closed-loop points with a known GPU count); None without."""
    view = data.operator
    table = view.frontier if view is not None else pd.DataFrame()
    if table.empty or table.tok_s_per_gpu.isna().all():
        return None
    table = table[table.tok_s_per_gpu.notna()]
    workloads = sorted(table.workload.unique())
    fig = Figure(figsize=(8.5, 5.5 * len(workloads)), layout="constrained")
    fig.suptitle(_title(data, "throughput per user vs per GPU (Pareto frontier)"), fontsize=10)
    axes = fig.subplots(len(workloads), 1, squeeze=False)
    variants = sorted(table.variant.unique())
    colours = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    for ax, workload in zip((a[0] for a in axes), workloads, strict=True):
        mine = table[table.workload == workload]
        for variant, group in mine.groupby("variant", sort=True):
            group = group.sort_values("concurrency")
            colour = colours[str(variant)]
            ax.plot(group.tok_s_per_user, group.tok_s_per_gpu, "-o", color=colour,
                    markersize=4, label=str(variant))
            segments = [[(r.tok_s_per_user_lo, r.tok_s_per_gpu_lo),
                         (r.tok_s_per_user_hi, r.tok_s_per_gpu_hi)]
                        for r in group.itertuples() if math.isfinite(r.tok_s_per_user_lo)]
            ax.add_collection(LineCollection(segments, colors=colour, linewidths=3, alpha=0.3))
            for r in group.itertuples():
                ax.annotate(f"c={r.concurrency:g}", (r.tok_s_per_user, r.tok_s_per_gpu),
                            fontsize=6, xytext=(3, 3), textcoords="offset points",
                            color=colour)
            cap = view.capacity(str(variant), workload, "concurrency") if view else None
            if cap is not None and cap.served:
                here = group[group.concurrency == cap.capacity]
                ax.plot(here.tok_s_per_user, here.tok_s_per_gpu, "*", color=colour,
                        markersize=15, markeredgecolor="black", markeredgewidth=0.6)
        front = mine[mine.frontier].sort_values("tok_s_per_user")
        ax.plot(front.tok_s_per_user, front.tok_s_per_gpu, "--", color="black", linewidth=0.9)
        ax.plot(front.tok_s_per_user, front.tok_s_per_gpu, "o", markersize=10,
                markerfacecolor="none", markeredgecolor="black")
        ax.set_xlabel("output tokens/s per user (output tok/s / concurrency)")
        ax.set_ylabel("output tokens/s per GPU")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{workload}: up and right is better", fontsize=9)
        handles, _ = ax.get_legend_handles_labels()
        handles += [
            Line2D([], [], linestyle="--", marker="o", color="black", markerfacecolor="none",
                   markersize=8, label="Pareto frontier (all variants)"),
            Line2D([], [], linestyle="none", marker="*", color="grey", markersize=12,
                   markeredgecolor="black", label=f"capacity: {view.target:.0%} within SLOs"
                   if view else "capacity"),
            Line2D([], [], color="grey", linewidth=3, alpha=0.3, label="95 % interval")]
        ax.legend(handles=handles, fontsize=7, title="setup · variant" if any(
            SEP in str(v) for v in variants) else "variant", title_fontsize=7)
    return fig
