"""The HTML report's cells table: one row per analysed cell, its windowed metrics with 95 %
intervals, the server's own counters and energy beside them; a forced-acceptance cell's status
carries the label (grid/report/forced.py)."""

from __future__ import annotations

import pandas as pd

from grid.analysis.forced import forced_mask
from grid.report.forced import tagged
from grid.report.markup import ci, esc, num
from grid.report.rundata import RunData

HEAD = ("variant workload load rep status tok/s goodput_tok/s req/s SLO_met TTFT_p50_ms "
        "TTFT_p99_ms TPOT_p50_ms TPOT_p99_ms accept window_s window_reqs ramp_s drain_s "
        "server_tok/s server_accept J/token").split()


def _status(r: pd.Series, forced: bool) -> str:
    status = esc(tagged(str(r.status), forced)) + (" <b>client saturated</b>"
                                                   if r.client_saturated is True else "")
    if r.status != "done" and isinstance(r.get("error"), str):  # the reason, on hover
        status = f'<span title="{esc(r.error)}">{status} &#9432;</span>'
    return status


def _row(r: pd.Series, forced: bool) -> str:
    load = f"c={int(r.concurrency)}" if pd.isna(r.rate) else f"{r.rate:g}/s"
    cols = [esc(r.variant), esc(r.workload), load, str(int(r["repeat"])), _status(r, forced),
            ci(r, "output_tok_s"), ci(r, "goodput_tok_s"), ci(r, "req_s", "{:.2f}"),
            ci(r, "slo_attainment", "{:.0%}"), ci(r, "ttft_p50_s", "{:.0f}", 1e3),
            ci(r, "ttft_p99_s", "{:.0f}", 1e3), ci(r, "tpot_p50_s", "{:.1f}", 1e3),
            ci(r, "tpot_p99_s", "{:.1f}", 1e3), ci(r, "accept_length", "{:.2f}"),
            num(r.get("window_s")), num(r.get("window_requests"), "{:.0f}"),
            num(r.get("ramp_s")), num(r.get("drain_s")), num(r.get("server_tok_s")),
            num(r.get("server_accept_length"), "{:.2f}"), num(r.get("j_per_token"), "{:.2f}")]
    if r.status != "done":  # no figures for a cell that did not finish
        cols = cols[:5] + ["-"] * (len(cols) - 5)
    return "<tr>" + "".join(f"<td class=n>{c}</td>" for c in cols) + "</tr>"


def cells_section(data: RunData) -> str:
    t = data.stats.table
    if t.empty:
        return "<h2>Cells</h2><p>(no committed cells)</p>"
    extra = t.merge(data.server_deltas, on="cell_id", how="left") if len(data.server_deltas) \
        else t
    if len(data.energy):
        extra = extra.merge(data.energy, on="cell_id", how="left")
    families = ", ".join(sorted(set(data.server_deltas.get("family", pd.Series()).dropna()))
                         ) or "none known"
    rows = ["<tr>" + "".join(f"<th>{h.replace('_', ' ')}</th>" for h in HEAD) + "</tr>"]
    view = extra.sort_values(["workload", "variant", "concurrency", "rate", "repeat"],
                             na_position="last")
    rows += [_row(r, forced) for (_, r), forced in zip(view.iterrows(), forced_mask(view),
                                                        strict=True)]
    return ("<h2>Cells</h2><p>Metrics over each cell's steady-state window (closed loop: from "
            "the moment every stream is busy to the last send; ramp-up and drain reported "
            "apart), 95 % bootstrap intervals over requests in brackets. Server tok/s and "
            "accept length come from the server's own /metrics counters (deltas over the "
            f"cell, read by engine family: {esc(families)}), to check the client's; server "
            "accept is each engine's own definition: completion tokens per verify call "
            "(SGLang), 1 + accepted / drafts over decode steps (vLLM).</p><table>"
            + "".join(rows) + "</table>")
