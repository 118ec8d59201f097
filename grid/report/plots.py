"""The report's plots, made with matplotlib's object API on the Agg backend (no display, no
global pyplot state): each function takes a run's analysed data and returns a Figure, or None
when the run has nothing to show for it. `png(fig)` renders one to bytes."""

from __future__ import annotations

import io
import math
from collections.abc import Collection

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from grid.analysis.bootstrap import interval
from grid.analysis.forced import forced_mask
from grid.analysis.points import points
from grid.analysis.setups import SEP, is_baseline
from grid.report import alignment, operator_plots, serverplots
from grid.report.agentic import (
    bin_order,
    conversation_cells,
    crossover_points,
    turn_table,
    with_speedup,
)
from grid.report.forced import HATCH, forced_variants, legend, line_format
from grid.report.rundata import RunData

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
           suffix: str = "", forced: Collection[str] = ()) -> bool:
    """One line per variant and workload with its interval; the `forced` variants' in the
    forced style (grid/report/forced.py). Whether one of them was drawn."""
    many = frame.workload.nunique() > 1
    drew = False
    for (variant, workload), group in frame.groupby(["variant", "workload"], sort=True):
        group = group.sort_values("load")
        err = np.vstack([(group.value - group.lo).clip(lower=0), (group.hi - group.value)
                         .clip(lower=0)]) * scale
        own = str(variant) in forced
        drew |= own
        ax.errorbar(group.load, group.value * scale, yerr=np.nan_to_num(err),
                    fmt=line_format(style) if own else style, capsize=3, markersize=4,
                    label=_label(str(variant), str(workload), many) + suffix)
    return drew


def _kinds(frame: pd.DataFrame) -> list[str]:
    return sorted(frame.load_kind.unique()) if len(frame) else []


def throughput(data: RunData) -> Figure | None:
    """Output tok/s and goodput tok/s against load, per variant, with 95 % intervals."""
    tok, good = series(data, "output_tok_s"), series(data, "goodput_tok_s")
    if tok.empty:
        return None
    kinds = _kinds(tok)
    forced = forced_variants(data.cells)
    fig = Figure(figsize=(11, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 2, squeeze=False)
    for row, kind in enumerate(kinds):
        for ax, frame, title in ((axes[row][0], tok, "output tokens/s"),
                                 (axes[row][1], good, f"goodput tokens/s ({data.slo.describe()})")):
            drew = _lines(ax, frame[frame.load_kind == kind], forced=forced)
            _axis(ax, kind, frame[frame.load_kind == kind].load)
            ax.set_title(title, fontsize=9)
            legend(ax, drew, fontsize=7)
    return fig


def latency(data: RunData) -> Figure | None:
    """TTFT and TPOT, p50 (solid) and p99 (dashed), against load."""
    frames = {m: series(data, m) for m in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                                           "tpot_p99_s")}
    if frames["ttft_p50_s"].empty:
        return None
    kinds = _kinds(frames["ttft_p50_s"])
    forced = forced_variants(data.cells)
    fig = Figure(figsize=(11, 4 * len(kinds)), layout="constrained")
    axes = fig.subplots(len(kinds), 2, squeeze=False)
    for row, kind in enumerate(kinds):
        for ax, name in ((axes[row][0], "ttft"), (axes[row][1], "tpot")):
            drew = False
            for q, style in (("p50", "-o"), ("p99", "--^")):
                frame = frames[f"{name}_{q}_s"]
                drew |= _lines(ax, frame[frame.load_kind == kind], 1e3, style, f" {q}",
                               forced)
            _axis(ax, kind, frames["ttft_p50_s"].query("load_kind == @kind").load)
            ax.set_ylabel("ms")
            ax.set_title(f"{name.upper()} p50 / p99", fontsize=9)
            legend(ax, drew, fontsize=7)
    return fig


def speedup(data: RunData) -> Figure | None:
    """Speedup over the baseline against load with its interval, one line per variant (each
    over its own setup's baseline, labelled with the setup when the run has several engines,
    models or hardware); each crossover marked (dotted, its interval shaded), the recommended
    speculative_disable_above_batch (dash-dot) and each variant's capacity under the SLOs (a
    star on its line; the baseline's: a dashed grey line)."""
    table = data.decision.speedups
    if table.empty:
        return None
    kinds = sorted(table.load_kind.unique())
    fig = Figure(figsize=(8, 4.5 * len(kinds)), layout="constrained")
    fig.suptitle(_simulated(data, f"output tok/s speedup over {data.baseline} vs load"),
                 fontsize=10)
    axes = fig.subplots(len(kinds), 1, squeeze=False)
    view = data.operator
    for row, kind in enumerate(kinds):
        ax = axes[row][0]
        frame = table[table.load_kind == kind]
        many = frame.workload.nunique() > 1
        marks = False
        drawn: set[tuple[str, str]] = set()
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
            for r in data.decision.recommendations if kind == "concurrency" else ():
                n = r.get("speculative_disable_above_batch")
                if (r["variant"], r["workload"]) == (variant, workload) and n:
                    ax.axvline(n, color=line.get_color(), linestyle="-.", linewidth=0.9)
                    ax.annotate(f"set off_above={n}", (n, 0), fontsize=7, xytext=(4, -22),
                                textcoords="offset points")
            cap = view.capacity(str(variant), str(workload), kind) if view else None
            if cap is not None and cap.served:
                here = group[group.load == cap.capacity]
                ax.plot(here.load, 100 * here.speedup, "*", color=line.get_color(),
                        markersize=14, markeredgecolor="black", markeredgewidth=0.6)
                marks = True
            own = str(group.baseline.iloc[0])  # this variant's own setup's baseline
            base = view.capacity(own, str(workload), kind) if view else None
            if base is not None and base.served and (own, workload) not in drawn:
                drawn.add((own, workload))  # once per baseline and workload
                ax.axvline(base.capacity, color="grey", linestyle="--", linewidth=0.9)
                ax.annotate(f"{own} capacity", (base.capacity, 0), fontsize=7,
                            xytext=(4, -12), textcoords="offset points", color="grey")
        ax.axhline(0, color="black", linewidth=0.8)
        _axis(ax, kind, frame.load)
        if kind == "concurrency":
            ax.set_xlabel("concurrency (requests in flight, log scale)")
        ax.set_ylabel("speedup of output tok/s over baseline (%)")
        ax.set_title("band: 95 % interval; dotted: crossover; dash-dot: recommended threshold"
                     + ("; star: capacity under the SLOs" if marks else ""), fontsize=9)
        ax.legend(fontsize=7, title="setup · variant" if frame.variant.str.contains(SEP).any()
                  else "variant", title_fontsize=7)
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
    forced = forced_variants(data.cells) & {str(v) for v in ratio.columns}
    width = 0.8 / max(1, len(ratio.columns))
    for i, variant in enumerate(ratio.columns):
        ax1.bar(np.arange(len(ratio)) + i * width, ratio[variant], width, label=str(variant),
                hatch=HATCH if str(variant) in forced else None, edgecolor="white")
    ax1.set_xticks(np.arange(len(ratio)) + 0.4 - width / 2, [str(d) for d in ratio.index])
    ax1.set_title("accept length by prompt domain", fontsize=9)
    ax1.set_ylabel("tokens per verify step")
    legend(ax1, bool(forced), bars=True, fontsize=7)
    by_load = spec.groupby(["variant", "concurrency"], observed=True)[
        ["output_tokens", "spec_verify_ct"]].sum()
    load_ratio = (by_load.output_tokens / by_load.spec_verify_ct).unstack("variant")
    for variant in load_ratio.columns:
        ax2.plot(load_ratio.index, load_ratio[variant],
                 line_format("-o") if str(variant) in forced else "-o", markersize=4,
                 label=str(variant))
    legend(ax2, bool(forced), fontsize=7)
    _axis(ax2, "concurrency", load_ratio.index)
    ax2.set_title("accept length by concurrency", fontsize=9)
    ax2.grid(True, alpha=0.3)
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
    forced = set(data.cells.cell_id[forced_mask(data.cells)]) if len(data.cells) else set()
    hatches = [HATCH if c in forced else None for c in means.index]
    fig = Figure(figsize=(max(8, 0.25 * len(means)), 2.6 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False)
    for ax, name in zip((a[0] for a in axes), names, strict=True):
        ax.bar(range(len(means)), means[name], hatch=hatches, edgecolor="white")
        ax.set_ylabel(name, fontsize=8)
        ax.set_xticks(range(len(means)), ticks, rotation=90, fontsize=6)
        if forced & set(means.index):
            legend(ax, True, bars=True, fontsize=7)
    return fig


def _short_load(labels: pd.DataFrame, cell_id: str) -> str:
    if cell_id not in labels.index:
        return ""
    row = labels.loc[cell_id]
    return f"c={int(row.concurrency)}" if pd.isna(row.rate) else f"{row.rate:g}/s"


def _simulated(data: RunData, title: str) -> str:
    """A figure title, marked when its numbers come from the simulator or from real engines on
    a CPU (a plot file may be seen without the report's banner)."""
    return f"{data.label} — {title}" if data.label else title


def conversation_load(data: RunData) -> Figure | None:
    """Conversation cells: output tok/s (95 % interval) and prefix-cache hit rate against
    conversations in flight (open loop: conversation arrival rate), per variant."""
    if data.turns.empty:
        return None
    workloads = set(data.turns.workload.astype(str))
    tok = series(data, "output_tok_s")
    tok = tok[tok.workload.isin(workloads)] if len(tok) else tok
    if tok.empty:
        return None
    cells = conversation_cells(data.stats.table, data.turns, data.baseline)
    cells = cells.assign(load=np.where(cells.rate.isna(), cells.concurrency, cells.rate))
    kinds = _kinds(tok)
    forced = forced_variants(data.cells)
    fig = Figure(figsize=(11, 4 * len(kinds)), layout="constrained")
    fig.suptitle(_simulated(data, "conversations: throughput and prefix-cache hits by load"),
                 fontsize=10)
    axes = fig.subplots(len(kinds), 2, squeeze=False)
    for row, kind in enumerate(kinds):
        frame = tok[tok.load_kind == kind]
        ax1, ax2 = axes[row]
        drew = _lines(ax1, frame, forced=forced)
        _axis(ax1, kind, frame.load)
        ax1.set_title("output tokens/s of the rounds (95 % interval)", fontsize=9)
        legend(ax1, drew, fontsize=7)
        part = cells[cells.rate.isna() == (kind == "concurrency")]
        hits = part.groupby(["variant", "load"]).cache_hit_rate.mean().dropna()
        drew = False
        for variant, group in hits.groupby(level="variant", sort=True):
            own = str(variant) in forced
            drew |= own
            ax2.plot(group.index.get_level_values("load"), 100 * group.to_numpy(),
                     line_format("-o") if own else "-o", markersize=4, label=str(variant))
        _axis(ax2, kind, frame.load)
        ax2.set_ylim(0, 100)
        ax2.set_ylabel("% of context tokens from the prefix cache")
        ax2.set_title("prefix-cache hit rate (completed rounds)", fontsize=9)
        legend(ax2, drew, fontsize=7)
    if kinds == ["concurrency"]:
        for ax in axes[0]:
            ax.set_xlabel("conversations in flight")
    return fig


def conversation_context(data: RunData) -> Figure | None:
    """Conversation rounds by context length (the bins of grid/report/agentic.py): TTFT p50,
    accept length, prefix-cache hit rate and round speed over the baseline's (where it drops
    below 1, speculation stops paying: marked), one line per variant and concurrency."""
    if data.turns.empty:
        return None
    table = with_speedup(turn_table(data.turns), data.baseline)
    if table.empty:
        return None
    order = sorted(set(table.bin), key=bin_order)
    x_of = {b: i for i, b in enumerate(order)}
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    fig.suptitle(_simulated(data, "conversation rounds by context length (tokens)"),
                 fontsize=10)
    axes = fig.subplots(2, 2)
    panels = ((axes[0][0], "ttft_p50_s", 1e3, "TTFT p50 (ms)"),
              (axes[0][1], "accept_length", 1.0, "accept length (tokens per verify step)"),
              (axes[1][0], "cache_hit_rate", 100.0, "prefix-cache hit rate (%)"),
              (axes[1][1], "speedup", 1.0, f"round tok/s / {data.baseline}'s"))
    colours = {v: f"C{i % 10}" for i, v in enumerate(sorted(table.variant.unique()))}
    styles = {c: s for c, s in zip(sorted(table.concurrency.dropna().unique()),
                                   ("-o", "--s", ":^", "-.v", "-D", "--P"), strict=False)}
    forced = forced_variants(data.cells)  # the line style is the load's: theirs an x
    for ax, column, scale, title in panels:
        drew = False
        for (variant, conc), g in table.groupby(["variant", "concurrency"], sort=True):
            if column == "speedup" and is_baseline(str(variant), data.baseline):
                continue  # 1.0 by definition: the horizontal line
            values = pd.to_numeric(g[column], errors="coerce")
            if values.isna().all():
                continue
            own = str(variant) in forced
            drew |= own
            fmt = styles.get(conc, "-o")
            ax.plot([x_of[b] for b in g.bin], values * scale,
                    line_format(fmt, dotted=False) if own else fmt, color=colours[variant],
                    markersize=4, label=f"{variant} c={conc:g}")
        ax.set_xticks(range(len(order)), order)
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            legend(ax, drew, fontsize=7)
    speed_ax = axes[1][1]
    speed_ax.axhline(1.0, color="black", linewidth=0.8)
    for p in crossover_points(table, data.baseline):
        if p["stops_from"] is not None:
            x = x_of[p["stops_from"]]
            speed_ax.plot([x], [p["speedup_there"]], "x", color=colours[p["variant"]],
                          markersize=10, markeredgewidth=2)
            speed_ax.annotate(f"{p['variant']} c={p['concurrency']:g} stops paying", (x,
                              p["speedup_there"]), fontsize=7, xytext=(4, -12),
                              textcoords="offset points")
    speed_ax.set_title(f"speedup over {data.baseline} (round tok/s; x: stops paying)",
                       fontsize=9)
    for ax in axes[1]:
        ax.set_xlabel("context length (tokens)")
    return fig


PLOTS = {"throughput": throughput, "latency": latency, "speedup": speedup,
         "frontier": operator_plots.frontier, "acceptance": acceptance,
         "server_metrics": serverplots.server_metrics, "telemetry": telemetry,
         "conversation_load": conversation_load, "conversation_context": conversation_context,
         "alignment": alignment.figure}
"""Name -> plot function, in report order."""
CONVERSATION_PLOTS = ("conversation_load", "conversation_context")
"""The plots the report shows in its conversation section (the rest under Plots)."""


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
        drew = _lines(ax, ta[ta.load_kind == kind] if len(ta) else ta, suffix=" (A)",
                      forced=forced_variants(a.cells))
        drew |= _lines(ax, tb[tb.load_kind == kind] if len(tb) else tb, style="--s",
                       suffix=" (B)", forced=forced_variants(b.cells))
        _axis(ax, kind, pd.concat([ta, tb]).query("load_kind == @kind").load)
        ax.set_title(f"output tokens/s: A = {a.run_dir.name}, B = {b.run_dir.name}",
                     fontsize=9)
        legend(ax, drew, fontsize=7)
    return fig
