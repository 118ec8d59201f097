"""The self-contained HTML report: the run's answer in one sentence first (grid/report/
answer.py), then the decision, validity, the plots (embedded as
base64 PNG, so the file opens offline anywhere), the cells with their intervals, and
provenance. `compare_html` puts two runs side by side."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, cast

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import excludes_zero, interval
from grid.analysis.points import fmt_load, points, repeat_lines
from grid.analysis.verdict import UNDETERMINED
from grid.analysis.winners import NO_DIFFERENCE, best_share
from grid.questions import traced
from grid.report import alignment, lossless, startup
from grid.report.agentic import (
    BIN_EDGES,
    cache_hit_by_variant,
    conversation_cells,
    crossover,
    turn_table,
    with_speedup,
)
from grid.report.answer import answers
from grid.report.celltable import cells_section
from grid.report.data import provenance
from grid.report.forced import forced_variants, tagged
from grid.report.markup import ci, esc, html_table, img, num
from grid.report.plots import CONVERSATION_PLOTS
from grid.report.rundata import SIM_BANNER, RunData
from grid.report.text import domain_acceptance

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
.answer{font-size:1.15em;font-weight:bold}
.validity li{margin:.2em 0}.warning{color:#8a1c00}.note{color:#555}
.banner{background:#fff3cd;border:2px solid #d39e00;padding:.6em 1em;font-weight:bold}
table{border-collapse:collapse;font-size:.8em}td,th{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}code,pre{font-size:.8em}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.5em}
"""


def _repeat_range(row: Any) -> str:
    """` repeats -70%..-44%` where the comparison has two or more repeats in common."""
    lo, hi = getattr(row, "repeat_lo", None), getattr(row, "repeat_hi", None)
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return ""
    return f" <small>repeats {lo:+.0%}..{hi:+.0%}</small>"


def validity_section(data: RunData, title: str = "Validity") -> str:
    out = [f"<h2>{esc(title)}</h2>"]
    if data.simulated and data.sim_banner() == SIM_BANNER:
        out.append('<p class="banner">SIMULATION — every number in this report comes from '
                   "specgrid's simulated SGLang server, not from a GPU.</p>")
    elif data.simulated:
        out.append(f'<p class="banner">{esc(data.sim_banner())}</p>')
    if data.on_cpu:
        out.append(f'<p class="banner">{esc(data.cpu_banner())}</p>')
    banners = (data.sim_banner() if data.simulated else None,
               data.cpu_banner() if data.on_cpu else None)
    items = "".join(f'<li class="{level}">{esc(text)}</li>' for level, text in data.validity
                    if text not in banners)  # the banners above say it louder
    out.append(f'<ul class="validity">{items or "<li>nothing to flag</li>"}</ul>')
    return "\n".join(out)


def decision_section(data: RunData) -> str:
    d = data.decision
    out = ["<h2>Decision</h2>"]
    if d.recommendations:
        out.append("<ul>" + "".join(
            f"<li><b>{esc(r['variant'])} on {esc(r['workload'])}</b>: {esc(r['statement'])}"
            f" (plausible range {esc(r['plausible_range'])})</li>"
            for r in d.recommendations) + "</ul>")
    if d.crossovers:
        out.append("<ul>" + "".join(
            f"<li>{esc(c.variant)} vs {esc(d.baseline)} on {esc(c.workload)}: "
            f"{esc(c.describe())}</li>"
            for c in d.crossovers) + "</ul>")
    if not d.speedups.empty:
        out.append("<p>Speedup over the baseline (output tok/s and goodput tok/s, 95 % "
                   "interval; a winner is named only when the interval excludes zero; with "
                   "repeats, the range of the per-repeat ratios):</p>")
        out += [f"<p>{esc(line)}</p>" for line in repeat_lines(d.repeats)] if d.repeats else []
        good = d.goodput_speedups.set_index(["variant", "workload", "load_kind", "load"]) \
            if not d.goodput_speedups.empty else None
        rows = ["<tr><th>variant</th><th>vs</th><th>workload</th><th>load</th>"
                "<th>tok/s speedup</th>"
                "<th>verdict</th><th>goodput speedup</th><th>verdict</th></tr>"]
        for r in d.speedups.sort_values(["variant", "workload", "load_kind", "load"]
                                        ).itertuples():
            g: Any = None
            key: Any = (r.variant, r.workload, r.load_kind, r.load)
            if good is not None and key in good.index:
                g = good.loc[key]
            load = fmt_load(str(r.load_kind), cast(float, r.load))
            rows.append(
                f"<tr><td>{esc(r.variant)}</td><td>{esc(r.baseline)}</td>"
                f"<td>{esc(r.workload)}</td><td>{load}</td>"
                f"<td class=n>{num(r.speedup, '{:+.1%}')} <small>[{num(r.lo, '{:+.1%}')}, "
                f"{num(r.hi, '{:+.1%}')}]</small>{_repeat_range(r)}</td>"
                f"<td>{esc(r.verdict)}</td>"
                + (f"<td class=n>{num(g.speedup, '{:+.1%}')} <small>[{num(g.lo, '{:+.1%}')}, "
                   f"{num(g.hi, '{:+.1%}')}]</small></td><td>{esc(g.verdict)}</td>"
                   if g is not None else "<td>–</td><td></td>") + "</tr>")
        out.append("<table>" + "".join(rows) + "</table>")
    out.append(setups_section(d.setups))
    thresholds = d.thresholds
    if thresholds.get("per_load"):
        out.append("<p>Threshold sweep: winner per load level (margin over the runner-up, "
                   "95 % interval):</p>")
        rows = ["<tr><th>workload</th><th>by</th><th>load</th><th>winner</th><th>runner-up"
                "</th><th>margin</th><th>best in (bootstrap)</th><th>verdict</th></tr>"]
        for w in thresholds["per_load"] + [dict(x, load="overall", load_kind="")
                                           for x in thresholds["overall"]]:
            load = w["load"] if isinstance(w["load"], str) else fmt_load(w["load_kind"], w["load"])
            rows.append(f"<tr><td>{esc(w['workload'])}</td><td>{esc(w['metric'])}</td>"
                        f"<td>{esc(load)}</td><td>{esc(w['winner'])}</td>"
                        f"<td>{esc(w['runner_up'])}</td><td class=n>{num(w['margin'], '{:+.1%}')}"
                        f" <small>[{num(w['lo'], '{:+.1%}')}, {num(w['hi'], '{:+.1%}')}]</small>"
                        f"</td><td class=n>{num(w.get('wins_share'), '{:.0%}')}</td>"
                        f"<td>{esc(w['verdict'])}</td></tr>")
        out.append("<table>" + "".join(rows) + "</table>")
    if len(out) == 1:
        out.append("<p>No baseline/variant pairs to compare in this run.</p>")
    return "\n".join(out)


def setups_section(table: pd.DataFrame) -> str:
    """The setups (engine, model, hardware) compared baseline to baseline; empty when the run
    has one setup."""
    if table.empty:
        return ""
    rows = ["<tr><th>axis</th><th>setup</th><th>vs</th><th>same</th><th>workload</th>"
            "<th>load</th><th>tok/s ratio - 1</th><th>verdict</th></tr>"]
    for r in table.sort_values(["axis", "value", "same", "workload", "load_kind", "load"]
                               ).itertuples():
        load = fmt_load(str(r.load_kind), cast(float, r.load))
        rows.append(f"<tr><td>{esc(r.axis)}</td><td>{esc(r.variant)}</td><td>{esc(r.baseline)}"
                    f"</td><td>{esc(r.same)}</td><td>{esc(r.workload)}</td><td>{load}</td>"
                    f"<td class=n>{num(r.speedup, '{:+.1%}')} <small>[{num(r.lo, '{:+.1%}')}, "
                    f"{num(r.hi, '{:+.1%}')}]</small></td><td>{esc(r.verdict)}</td></tr>")
    return ("<h3>Setups compared, baseline to baseline</h3><p>Each variant above is compared "
            "only with the baseline of its own setup; here the setups' baselines are compared "
            "with each other (output tok/s, 95 % interval).</p><table>" + "".join(rows)
            + "</table>")


OPERATOR_PLOTS = ("frontier",)
"""The plots the report shows in its operator section (the rest under Plots)."""


def _load(kind: str, load: float) -> str:
    if not math.isfinite(load):
        return "none" if load < 0 else "–"
    return fmt_load(kind, load)


def operator_section(data: RunData, figures: dict[str, bytes]) -> str:
    """Capacity under the SLOs, the variant that serves the most there, the Pareto frontier
    (figure and table) and cost (grid/report/operator.py); empty without analysed points."""
    view = data.operator
    if view is None or (not view.capacities and view.frontier.empty):
        return ""
    out = ["<h2>Capacity, frontier and cost</h2>"]
    if data.label:
        out.append(f'<p class="banner">{esc(data.label)} — the capacity, throughput, dollar '
                   "and energy figures below come from this run's source, not from a GPU "
                   "serving the real model.</p>")
    price = (f"${view.gpu_hour_usd:g} per GPU-hour (set by the user)"
             if view.gpu_hour_usd is not None else
             "no price set (hardware.gpu_hour_usd, or --gpu-hour-usd): no dollar figures")
    out.append(f"<p>Capacity = the highest tested load, from the lowest up, at which at least "
               f"{view.target:.0%} of the requests meet the goodput SLO ({esc(data.slo.describe())}"
               f"), with its interval: from the highest load whose attainment's exact 95 % "
               f"interval lies at or above it to the load below the first whose interval lies "
               f"below (grid/analysis/capacity.py). Dollars per million "
               f"output tokens = GPUs × price / 3600 / output tok/s × 10<sup>6</sup>; price: "
               f"{esc(price)}. J/token where the GPUs' power was read. (≥): no tested "
               f"load missed the SLOs, the capacity may be higher.</p>")
    rows = []
    for c in view.capacities:
        rows.append([esc(c.variant), esc(c.workload),
                     "undetermined" if c.undetermined else
                     _load(c.load_kind, c.capacity) + ("" if c.bracketed else " (≥)"),
                     f"{_load(c.load_kind, c.lo)} .. {_load(c.load_kind, c.hi)}",
                     num(c.attainment, "{:.0%}"),
                     f"{num(c.goodput_tok_s)} <small>[{num(c.goodput_tok_s_lo)}, "
                     f"{num(c.goodput_tok_s_hi)}]</small>",
                     num(c.gpus, "{:g}"), num(c.goodput_per_gpu), num(c.usd_per_mtok, "${:.2f}"),
                     num(c.usd_per_good_mtok, "${:.2f}"), num(c.j_per_token, "{:.2f}")])
    out.append(html_table(["variant", "workload", "capacity", "95 % interval", "SLO met",
                           "goodput tok/s", "GPUs", "goodput tok/s per GPU", "$ / M output tok",
                           "$ / M tok within SLO", "J/token"], rows))
    for b in view.best:
        unit = "good tok/s per GPU" if b["metric"].endswith("per_gpu") else "good tok/s"
        word = "serves the most" if b["verdict"] == "winner" else \
            f"leads ({NO_DIFFERENCE})"
        out.append(f"<p><b>At the SLO on {esc(b['workload'])}: {esc(b['winner'])} {word}</b>"
                   f" — {num(b['value'])} {unit} at its capacity vs {esc(b['runner_up'])} "
                   f"{num(b['runner_up_value'])} ({num(b['margin'], '{:+.1%}')} <small>["
                   f"{num(b['lo'], '{:+.1%}')}, {num(b['hi'], '{:+.1%}')}]</small>)"
                   f"{esc(best_share(b.get('wins_share')))}</p>")
    out += [img(png, name) for name, png in figures.items() if name in OPERATOR_PLOTS]
    table = view.frontier
    if len(table):
        out.append("<p>Per user = output tok/s / concurrency; per GPU = output tok/s / the "
                   "GPUs that served the cell (closed-loop cells); ◆ = on the workload's "
                   "Pareto frontier (no other point is at least as fast per user and per GPU "
                   "and faster in one).</p>")
        out.append(html_table(
            ["variant", "workload", "load", "GPUs", "tok/s", "tok/s per user", "tok/s per GPU",
             "frontier", "$ / M output tok", "J/token"],
            [[esc(r.variant), esc(r.workload), f"c={r.concurrency:g}", num(r.gpus, "{:g}"),
              f"{num(r.output_tok_s)} <small>[{num(r.output_tok_s_lo)}, "
              f"{num(r.output_tok_s_hi)}]</small>",
              f"{num(r.tok_s_per_user)} <small>[{num(r.tok_s_per_user_lo)}, "
              f"{num(r.tok_s_per_user_hi)}]</small>",
              f"{num(r.tok_s_per_gpu)} <small>[{num(r.tok_s_per_gpu_lo)}, "
              f"{num(r.tok_s_per_gpu_hi)}]</small>", "◆" if r.frontier else "",
              f"{num(r.usd_per_mtok, '${:.2f}')} <small>[{num(r.usd_per_mtok_lo, '${:.2f}')}, "
              f"{num(r.usd_per_mtok_hi, '${:.2f}')}]</small>", num(r.j_per_token, "{:.2f}")]
             for r in table.itertuples()]))
    if view.gpus_unknown:
        out.append(f"<p class=note>GPUs not recorded for {esc(', '.join(view.gpus_unknown))}: "
                   "no per-GPU or dollar figures for them.</p>")
    return "\n".join(out)


def conversation_section(data: RunData, figures: dict[str, bytes]) -> str:
    """Conversation cells (workload.kind=conversations, grid/report/agentic.py): per cell,
    then per context-length bin with the speedup over the baseline and where speculation
    stops paying, with the conversation plots. Empty without conversation cells."""
    turns = data.turns
    if turns.empty:
        return ""
    base = data.baseline
    out = ["<h2>Conversations</h2>"]
    if data.simulated:
        out.append('<p class="banner">SIMULATION — these conversations were served by '
                   "specgrid's simulated SGLang server, not a GPU.</p>")
    out.append("<p>Multi-turn replay: each round sends the whole history, so the context "
               "grows round by round and most of it can come from the prefix cache. "
               "c = conversations in flight. A round is a request: the cells table below and "
               "this one count sent rounds, over the steady-state window with 95 % "
               "intervals (rounds resampled as if independent; rounds of one conversation "
               "share its context, so these intervals are on the narrow side). ITL from the "
               "cell row (all completed rounds).</p>")
    hits = cache_hit_by_variant(turns)
    out.append("<p>Prefix-cache hit rate (Σ cached / Σ context tokens of completed rounds): "
               + "; ".join(f"{esc(v)} {num(rate, '{:.0%}')} over {n} rounds"
                           for v, (rate, n) in hits.items()) + "</p>")
    cells = conversation_cells(data.stats.table, turns, base)
    forced = forced_variants(data.cells)
    itl = data.cells.set_index("cell_id")[["itl_p50_s", "itl_p99_s"]] \
        if {"itl_p50_s", "itl_p99_s"} <= set(data.cells) else None
    rows = []
    for _, r in cells.iterrows():
        load = f"c={int(r.concurrency)}" if pd.isna(r.rate) else f"{r.rate:g}/s"
        i = itl.loc[r.cell_id] if itl is not None and r.cell_id in itl.index else {}
        rows.append([esc(r.variant), esc(r.workload), load,
                     esc(tagged(str(r.status), r.variant in forced)),
                     num(r.conversations, "{:.0f}"), num(r.rounds, "{:.0f}"),
                     ci(r, "output_tok_s"), num(r.vs_baseline, "{:.2f}x"),
                     ci(r, "ttft_p50_s", "{:.0f}", 1e3), ci(r, "ttft_p99_s", "{:.0f}", 1e3),
                     num(i.get("itl_p50_s"), "{:.1f}", 1e3), num(i.get("itl_p99_s"), "{:.1f}", 1e3),
                     ci(r, "accept_length", "{:.2f}"), num(r.cache_hit_rate, "{:.0%}")])
    out.append(html_table(["variant", "workload", "load", "status", "conversations", "rounds",
                           "tok/s", f"vs {esc(base)}", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                           "ITL p99 ms", "accept", "cache hit"], rows))
    table = with_speedup(turn_table(turns), base)
    edges = ", ".join(f"{e // 1024}k" for e in BIN_EDGES[1:])
    out.append(f"<p>By context length of the round (bins split at {edges} tokens; completed "
               f"rounds): decode = per-stream decode tok/s, round = output tokens / round E2E "
               f"(prefill of the new context plus decode: what an agent waits on), speedup = "
               f"round tok/s over {esc(base)}'s at the same concurrency and bin.</p>")
    out.append(html_table(
        ["variant", "c", "context", "rounds", "accept", "TTFT p50 ms", "decode tok/s",
         "round tok/s", "cache hit", "speedup"],
        [[esc(r.variant), num(r.concurrency, "{:.0f}"), esc(r.bin), str(r.rounds),
          num(r.accept_length, "{:.2f}"), num(r.ttft_p50_s, "{:.1f}", 1e3),
          num(r.stream_tok_s), num(r.round_tok_s), num(r.cache_hit_rate, "{:.0%}"),
          num(r.speedup, "{:.2f}x")] for r in table.itertuples()]))
    lines = crossover(table, base)
    if lines:
        out.append("<p>Where speculation stops paying for this traffic:</p><ul>"
                   + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>")
    out += [img(png, name) for name, png in figures.items() if name in CONVERSATION_PLOTS]
    return "\n".join(out)


def provenance_section(data: RunData) -> str:
    p = provenance(data)
    out = ["<h2>Provenance</h2>", f"<p>run {esc(p['run'])}; hardware: {esc(p['hardware'])}; "
           f"report made on {esc(p['report_host'])}</p>", "<p>versions: " + ", ".join(
               f"{esc(k)} {esc(v)}" for k, v in p["versions"].items()) + "</p>"]
    for s in p["servers"]:
        out.append(f"<p><b>{esc(s['variant'])}</b> — engine {esc(s['engine'])} "
                   f"{esc(s['engine_version'] or '')}, model {esc(s['model'])}, "
                   f"CUDA_VISIBLE_DEVICES={esc(s['cuda_visible_devices'] or '-')}</p>"
                   f"<pre>{esc(s['command'])}\nenv: {esc(s['env'])}</pre>")
    return "\n".join(out)


def page(title: str, body: list[str], lead: str = "") -> str:
    """The page: `lead` (the run's answer) right under the title, before anything else."""
    stamp = dt.datetime.now().isoformat(timespec="seconds")
    first = f'<p class="answer">{esc(lead)}</p>' if lead else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>{first}"
            f"<p class=note>generated {stamp}</p>" + "\n".join(body) + "</body></html>")


def run_html(data: RunData, figures: dict[str, bytes]) -> str:
    accept = domain_acceptance(data.requests, forced_variants(data.cells))
    first, *rest = answers(data.decision, data.label, data.search, data.provisional)
    # The question the run asked leads: its answer (the lead), its section, then the
    # per-variant sentence; any other run with that sentence and its decision.
    search = "" if data.search is None else traced(data.search).section(data.search)
    body = ([search] if rest else []) + [
        *(f'<p class="answer">{esc(r)}</p>' for r in rest), decision_section(data),
        validity_section(data), "" if rest else search,
        operator_section(data, figures), "<h2>Plots</h2>"]
    body += [img(png, name) for name, png in figures.items()
             if name not in CONVERSATION_PLOTS + OPERATOR_PLOTS]
    if accept:
        body.append("<h2>Acceptance by prompt domain</h2><ul>" + "".join(
            f"<li>{esc(a)}</li>" for a in accept) + "</ul>")
    lesson = alignment.section(data)
    if lesson:
        body.append("<h2>Acceptance against alignment with the drafter's training data</h2>"
                    f"<pre>{esc(lesson)}</pre>")
    body += [lossless.html_section(data), startup.html_section(data)]  # empty when nothing
    body += [conversation_section(data, figures),
             f"<p>Goodput SLO: {esc(data.slo.describe())} (SGLang's rule: a request counts "
             f"when it succeeded and met every SLO set).</p>", cells_section(data),
             provenance_section(data)]
    return page(f"specgrid run {data.run_dir.name}", body, first)


def comparison(a: RunData, b: RunData, metric: str = "output_tok_s") -> pd.DataFrame:
    """Points present in both runs: each run's value with its interval and B / A - 1 with
    its interval (replicates of the two runs are independent)."""
    pa_ = {(p.variant, p.workload, p.load_kind, p.load): p for p in points(a.stats, (metric,))}
    rows = []
    for p in points(b.stats, (metric,)):
        q = pa_.get((p.variant, p.workload, p.load_kind, p.load))
        if q is None:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = p.replicates[metric] / q.replicates[metric] - 1
        lo, hi = interval(ratio)
        a_lo, a_hi = interval(q.replicates[metric])
        b_lo, b_hi = interval(p.replicates[metric])
        change = p.values[metric] / q.values[metric] - 1
        rows.append({"variant": p.variant, "workload": p.workload, "load_kind": p.load_kind,
                     "load": p.load, "a": q.values[metric], "a_lo": a_lo, "a_hi": a_hi,
                     "b": p.values[metric], "b_lo": b_lo, "b_hi": b_hi, "change": change,
                     "lo": lo, "hi": hi,
                     "verdict": (("B faster" if lo > 0 else "B slower")
                                 if excludes_zero(lo, hi) else UNDETERMINED)})
    return pd.DataFrame(rows)


def compare_html(a: RunData, b: RunData, figures: dict[str, bytes]) -> str:
    body = [validity_section(a, f"Validity of A: {a.run_dir.name}"),
            validity_section(b, f"Validity of B: {b.run_dir.name}")]
    for metric, title in (("output_tok_s", "output tok/s"), ("goodput_tok_s", "goodput tok/s")):
        table = comparison(a, b, metric)
        body.append(f"<h2>{title}: A vs B</h2>")
        if table.empty:
            body.append("<p>The runs share no (variant, workload, load) points.</p>")
            continue
        rows = ["<tr><th>variant</th><th>workload</th><th>load</th><th>A</th><th>B</th>"
                "<th>B / A − 1</th><th>verdict</th></tr>"]
        for r in table.itertuples():
            load = fmt_load(str(r.load_kind), cast(float, r.load))
            rows.append(f"<tr><td>{esc(r.variant)}</td><td>{esc(r.workload)}</td><td>{load}"
                        f"</td><td class=n>{num(r.a)} <small>[{num(r.a_lo)}, {num(r.a_hi)}]</small>"
                        f"</td><td class=n>{num(r.b)} <small>[{num(r.b_lo)}, {num(r.b_hi)}]"
                        f"</small></td><td class=n>{num(r.change, '{:+.1%}')} <small>["
                        f"{num(r.lo, '{:+.1%}')}, {num(r.hi, '{:+.1%}')}]</small></td>"
                        f"<td>{esc(r.verdict)}</td></tr>")
        body.append("<table>" + "".join(rows) + "</table>")
    body.append("<h2>Plots</h2>")
    body += [img(png, name) for name, png in figures.items()]
    body += [decision_section(a).replace("<h2>Decision</h2>", "<h2>Decision of A</h2>"),
             decision_section(b).replace("<h2>Decision</h2>", "<h2>Decision of B</h2>"),
             provenance_section(a).replace("Provenance", "Provenance of A"),
             provenance_section(b).replace("Provenance", "Provenance of B")]
    return page(f"specgrid: {a.run_dir.name} (A) vs {b.run_dir.name} (B)", body)
