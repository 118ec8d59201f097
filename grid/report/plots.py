"""The report's plots, made with matplotlib's object API on the Agg backend (no display, no
global pyplot state): each function takes a run's analysed data and returns a Figure, or None
when the run has nothing to show for it. `png(fig)` renders one to bytes."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from grid.analysis.bootstrap import interval
from grid.analysis.decision import points
from grid.report.data import SERVER_GAUGES, RunData

DPI = 90


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def series(data: RunData, metric: str) -> pd.DataFrame:
    """Per (variant, workload, load): the metric's mean over repeats with its interval."""
    rows = []
    for p in points(data.stats, (metric,)):
        lo, hi = interval(p.replicates[metric])
        rows.append({"variant": p.variant, "workload": p.workload, "load_kind": p.load_kind,
                     "load": p.load, "value": p.values[metric], "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def _label(variant: str, workload: str, many_workloads: bool) -> str:
    return f"{variant} / {workload}" if many_workloads else variant


def _axis(ax, kind: str, loads: object = ()) -> None:
    ax.set_xscale("log", base=2)
    loads = sorted({float(x) for x in loads})  # type: ignore[attr-defined]
    if loads:
        ax.set_xticks(loads, [f"{x:g}" for x in loads])
        ax.minorticks_off()
    ax.set_xlabel("concurrency" if kind == "concurrency" else "request rate (req/s)")
    ax.grid(True, alpha=0.3)


def _lines(ax, frame: pd.DataFrame, scale: float = 1.0, style: str = "-o",
           suffix: str = "") -> None:
    many = frame.workload.nunique() > 1
    for (variant, workload), group in frame.groupby(["variant", "workload"], sort=True):
        group = group.sort_values("load")
        err = np.vstack([(group.value - group.lo).clip(lower=0), (group.hi - group.value)
                         .clip(lower=0)]) * scale
        ax.errorbar(group.load, group.value * scale, yerr=np.nan_to_num(err), fmt=style,
                    capsize=3, markersize=4,
                    label=_label(str(variant), str(workload), many) + suffix)


def _kinds(frame: pd.DataFrame) -> list[str]:
    return sorted(frame.load_kind.unique()) if len(frame) else []


def throughput(data: RunData) -> Figure | None:
    """Output tok/s and goodput tok/s against load, per variant, with 95 % intervals."""
    tok, good = series(data, "output_tok_s"), series(data, "goodput_tok_s")
    if tok.empty:
        return None
    kinds = _kinds(tok)
    fig = Figure(figsize=(11, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 2, squeeze=False)
    for row, kind in enumerate(kinds):
        for ax, frame, title in ((axes[row][0], tok, "output tokens/s"),
                                 (axes[row][1], good, f"goodput tokens/s ({data.slo.describe()})")):
            _lines(ax, frame[frame.load_kind == kind])
            _axis(ax, kind, frame[frame.load_kind == kind].load)
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7)
    return fig


def latency(data: RunData) -> Figure | None:
    """TTFT and TPOT, p50 (solid) and p99 (dashed), against load."""
    frames = {m: series(data, m) for m in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                                           "tpot_p99_s")}
    if frames["ttft_p50_s"].empty:
        return None
    kinds = _kinds(frames["ttft_p50_s"])
    fig = Figure(figsize=(11, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 2, squeeze=False)
    for row, kind in enumerate(kinds):
        for ax, name in ((axes[row][0], "ttft"), (axes[row][1], "tpot")):
            for q, style in (("p50", "-o"), ("p99", "--^")):
                frame = frames[f"{name}_{q}_s"]
                _lines(ax, frame[frame.load_kind == kind], 1e3, style, f" {q}")
            _axis(ax, kind, frames["ttft_p50_s"].query("load_kind == @kind").load)
            ax.set_ylabel("ms")
            ax.set_title(f"{name.upper()} p50 / p99", fontsize=9)
            ax.legend(fontsize=7)
    return fig


def speedup(data: RunData) -> Figure | None:
    """Speedup over the baseline against load with its interval; the crossover marked."""
    table = data.decision.speedups
    if table.empty:
        return None
    kinds = sorted(table.load_kind.unique())
    fig = Figure(figsize=(7, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 1, squeeze=False)
    for row, kind in enumerate(kinds):
        ax = axes[row][0]
        frame = table[table.load_kind == kind]
        many = frame.workload.nunique() > 1
        for (variant, workload), group in frame.groupby(["variant", "workload"], sort=True):
            group = group.sort_values("load")
            line = ax.plot(group.load, 100 * group.speedup, "-o", markersize=4,
                           label=_label(variant, workload, many))[0]
            ax.fill_between(group.load, 100 * group.lo, 100 * group.hi, alpha=0.15,
                            color=line.get_color())
            for c in data.decision.crossovers:
                if (c.variant, c.workload, c.load_kind) == (variant, workload, kind) \
                        and math.isfinite(c.point):
                    ax.axvline(c.point, color=line.get_color(), linestyle=":")
                    lo = c.lo if math.isfinite(c.lo) else min(c.loads)
                    hi = c.hi if math.isfinite(c.hi) else max(c.loads)
                    ax.axvspan(lo, hi, color=line.get_color(), alpha=0.07)
                    ax.annotate(f"crossover {c.point:.1f}", (c.point, 0), fontsize=7,
                                xytext=(4, 6), textcoords="offset points")
        ax.axhline(0, color="black", linewidth=0.8)
        _axis(ax, kind, frame.load)
        ax.set_ylabel("speedup over baseline (%)")
        ax.set_title("speedup vs load (band: 95 % interval; dotted: crossover)", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def acceptance(data: RunData) -> Figure | None:
    """Accept length (Σ completion / Σ verify) by prompt domain and by load."""
    req = data.requests
    spec = req[(req.status == "ok") & req.spec_verify_ct.notna() & (req.spec_verify_ct > 0)]
    if spec.empty:
        return None
    fig = Figure(figsize=(11, 4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    by_domain = spec.groupby(["variant", "domain"], observed=True)[
        ["output_tokens", "spec_verify_ct"]].sum()
    ratio = (by_domain.output_tokens / by_domain.spec_verify_ct).unstack("variant")
    width = 0.8 / max(1, len(ratio.columns))
    for i, variant in enumerate(ratio.columns):
        ax1.bar(np.arange(len(ratio)) + i * width, ratio[variant], width, label=str(variant))
    ax1.set_xticks(np.arange(len(ratio)) + 0.4 - width / 2, [str(d) for d in ratio.index])
    ax1.set_title("accept length by prompt domain", fontsize=9)
    ax1.set_ylabel("tokens per verify step")
    ax1.legend(fontsize=7)
    by_load = spec.groupby(["variant", "concurrency"], observed=True)[
        ["output_tokens", "spec_verify_ct"]].sum()
    load_ratio = (by_load.output_tokens / by_load.spec_verify_ct).unstack("variant")
    for variant in load_ratio.columns:
        ax2.plot(load_ratio.index, load_ratio[variant], "-o", markersize=4, label=str(variant))
    ax2.legend(fontsize=7)
    _axis(ax2, "concurrency", load_ratio.index)
    ax2.set_title("accept length by concurrency", fontsize=9)
    ax2.grid(True, alpha=0.3)
    return fig


def server_metrics(data: RunData) -> Figure | None:
    """SGLang's gauges over each cell (seconds since the cell's first scrape): running batch,
    queue, KV cache usage, spec accept rate; one line per cell, coloured by variant."""
    m = data.server_metrics
    m = m[m.metric.isin(list(SERVER_GAUGES))] if len(m) else m
    if m.empty:
        return None
    names = [n for n in SERVER_GAUGES if (m.metric == n).any()]
    fig = Figure(figsize=(11, 2.6 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False)
    variants = sorted(m.variant.astype(str).unique())
    colours = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    start = m.groupby("cell_id").scraped_at.min()
    for ax, name in zip((a[0] for a in axes), names, strict=True):
        part = m[m.metric == name]
        # several label sets (tp ranks) per scrape: their sum for counts, mean for ratios
        agg = "sum" if name in ("sglang:num_running_reqs", "sglang:num_queue_reqs") else "mean"
        series_ = part.groupby(["cell_id", "variant", "scraped_at"], observed=True
                               ).value.agg(agg).reset_index()
        lines, colors = [], []
        for cell_id, group in series_.groupby("cell_id", sort=False):
            lines.append(np.column_stack([group.scraped_at - start[cell_id], group.value]))
            colors.append(colours[str(group.variant.iloc[0])])
        # One collection per panel: hundreds of cells draw as fast as one line.
        ax.add_collection(LineCollection(lines, colors=colors, linewidths=0.8, alpha=0.7))
        ax.autoscale()
        ax.set_ylabel(SERVER_GAUGES[name], fontsize=8)
        ax.grid(True, alpha=0.3)
    for v in variants:
        axes[0][0].plot([], [], color=colours[v], label=v)
    axes[0][0].legend(fontsize=7, ncol=min(4, len(variants)))
    axes[-1][0].set_xlabel("seconds since the cell's first scrape")
    return fig


def telemetry(data: RunData) -> Figure | None:
    """GPU utilisation, memory used and power per cell (mean over the cell's samples and
    GPUs), where NVML was readable."""
    tel = data.telemetry
    tel = tel[tel.gpu >= 0] if len(tel) else tel
    if tel.empty:
        return None
    means = tel.groupby(["cell_id", "metric"]).value.mean().unstack("metric")
    names = [n for n in ("gpu_util_pct", "memory_used_mib", "power_w", "sm_clock_mhz")
             if n in means]
    labels = data.stats.table.set_index("cell_id")
    ticks = [f"{labels.variant.get(c, c)} {_short_load(labels, c)}" for c in means.index]
    fig = Figure(figsize=(max(8, 0.25 * len(means)), 2.6 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False)
    for ax, name in zip((a[0] for a in axes), names, strict=True):
        ax.bar(range(len(means)), means[name])
        ax.set_ylabel(name, fontsize=8)
        ax.set_xticks(range(len(means)), ticks, rotation=90, fontsize=6)
    return fig


def _short_load(labels: pd.DataFrame, cell_id: str) -> str:
    if cell_id not in labels.index:
        return ""
    row = labels.loc[cell_id]
    return f"c={int(row.concurrency)}" if pd.isna(row.rate) else f"{row.rate:g}/s"


PLOTS = {"throughput": throughput, "latency": latency, "speedup": speedup,
         "acceptance": acceptance, "server_metrics": server_metrics, "telemetry": telemetry}
"""Name -> plot function, in report order."""


def compare_throughput(a: RunData, b: RunData) -> Figure | None:
    """Output tok/s against load for two runs: A solid, B dashed."""
    ta, tb = series(a, "output_tok_s"), series(b, "output_tok_s")
    if ta.empty and tb.empty:
        return None
    kinds = sorted(set(_kinds(ta)) | set(_kinds(tb)))
    fig = Figure(figsize=(8, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 1, squeeze=False)
    for row, kind in enumerate(kinds):
        ax = axes[row][0]
        _lines(ax, ta[ta.load_kind == kind] if len(ta) else ta, suffix=" (A)")
        _lines(ax, tb[tb.load_kind == kind] if len(tb) else tb, style="--s", suffix=" (B)")
        _axis(ax, kind, pd.concat([ta, tb]).query("load_kind == @kind").load)
        ax.set_title(f"output tokens/s: A = {a.run_dir.name}, B = {b.run_dir.name}",
                     fontsize=9)
        ax.legend(fontsize=7)
    return fig
