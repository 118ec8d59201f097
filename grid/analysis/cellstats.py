"""Per-cell statistics with confidence intervals: each cell's steady-state window, throughput,
goodput, latency percentiles and accept length, each with a seeded bootstrap interval over the
cell's requests. Input: the loader's cells and requests frames; output: one row per cell plus
the replicates the decisions compare (grid/analysis/decision.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from grid.analysis.bootstrap import DEFAULT_REPLICATES, Resample, interval, seed_for
from grid.analysis.goodput import Slo, good_requests
from grid.analysis.window import Window, ended_inside, inside, steady_window, tokens_in_window

REQUEST_COLUMNS = ["cell_id", "status", "sent_at", "ttft_s", "tpot_s", "e2e_s",
                   "output_tokens", "spec_verify_ct"]
"""The request columns the analysis reads (never the per-token lists)."""
METRICS = ("output_tok_s", "req_s", "goodput_tok_s", "goodput_req_s", "slo_attainment",
           "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "accept_length")
"""Cell metrics that get an interval (`<metric>_lo`, `<metric>_hi`)."""
LOOSE_INTERVAL = 0.10
"""A throughput interval wider than ±10 % of the estimate is too loose to decide on."""
MIN_WINDOW_REQUESTS = 10


@dataclass
class CellStats:
    """The analysed cells: `table` (one row per cell) and each cell's replicates per metric."""

    table: pd.DataFrame
    replicates: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    slo: Slo = field(default_factory=Slo)
    n_replicates: int = DEFAULT_REPLICATES


def repeat_of(cell: pd.Series) -> int:
    """The cell's repeat index: its `repeat` column if the run has one, else the `repeat`
    (or `load.repeat`) axis value in its factors, else 0."""
    value = cell.get("repeat")
    if value is not None and not pd.isna(value):
        return int(value)
    try:
        factors = json.loads(cell.get("factors") or "{}")
    except (TypeError, ValueError):
        factors = {}
    for key in ("repeat", "load.repeat"):
        if factors.get(key) is not None:
            return int(factors[key])
    return 0


def _pcts(values: np.ndarray, qs: list[float]) -> list[float]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return [float("nan")] * len(qs)
    return [float(v) for v in np.percentile(finite, qs)]


def analyse_cell(req: pd.DataFrame, concurrency: int | None, closed_loop: bool, slo: Slo,
                 replicates: int, seed: int) -> tuple[dict, dict[str, np.ndarray]]:
    """Point estimates, intervals and replicates of one cell from its request rows."""
    sent = req.sent_at.to_numpy(dtype=float)
    ttft = req.ttft_s.to_numpy(dtype=float, na_value=np.nan)
    tpot = req.tpot_s.to_numpy(dtype=float, na_value=np.nan)
    e2e = req.e2e_s.to_numpy(dtype=float, na_value=np.nan)
    out = req.output_tokens.to_numpy(dtype=float, na_value=np.nan)
    verify = req.spec_verify_ct.to_numpy(dtype=float, na_value=np.nan)
    ok = (req.status == "ok").to_numpy()
    end = sent + e2e
    win: Window = steady_window(sent, end, concurrency, closed_loop)
    if win.steady and not inside(sent, end, win).any():
        # Too few requests for any to live inside the window: use the whole span.
        win = Window(float(np.nanmin(sent)), float(np.nanmax(np.where(np.isfinite(end), end,
                                                                     sent))), False, 0.0, 0.0)
    length = max(win.length_s, 1e-9)
    tokens = np.where(ok, tokens_in_window(sent, ttft, e2e, out, win), 0.0)
    good = good_requests(ok, ttft, tpot, e2e, out, slo)
    lived = inside(sent, end, win)
    ended = ended_inside(end, win) & ok
    lat = lived & ok
    spec = ok & np.isfinite(verify) & (verify > 0)
    spec_out, spec_verify = np.where(spec, out, 0.0), np.where(spec, verify, 0.0)

    ttft_p50, ttft_p99 = _pcts(ttft[lat], [50, 99])
    tpot_p50, tpot_p99 = _pcts(tpot[lat], [50, 99])
    point = {
        "output_tok_s": tokens.sum() / length,
        "req_s": ended.sum() / length,
        "goodput_tok_s": (tokens * good).sum() / length,
        "goodput_req_s": (ended & good).sum() / length,
        "slo_attainment": good[lived].mean() if lived.any() else float("nan"),
        "ttft_p50_s": ttft_p50, "ttft_p99_s": ttft_p99,
        "tpot_p50_s": tpot_p50, "tpot_p99_s": tpot_p99,
        "e2e_p50_s": _pcts(e2e[lat], [50])[0],
        "accept_length": spec_out.sum() / spec_verify.sum() if spec_verify.sum() else np.nan,
    }
    draws = Resample.draw(len(req), replicates, seed)
    # Every sum of the cell in one product: columns of `summed` in this order.
    busy = np.nan_to_num(np.clip(np.minimum(end, win.end) - np.maximum(sent, win.start),
                                 0.0, None))
    summed = np.column_stack([tokens, ended, tokens * good, ended & good, good & lived, lived,
                              spec_out, spec_verify, busy])
    totals = draws.sums(summed)
    tok_r, end_r, gtok_r, gend_r, good_r, lived_r, sout_r, sver_r, busy_r = totals.T
    # Rates per window second. In closed loop the streams are the fixed part: the window's
    # stream-seconds are given, what varies from request to request is how much each one
    # achieved in its stream time, so a replicate is Σ achieved / Σ stream time of its draw
    # times the streams (a ratio estimator). In open loop the arrivals themselves are random:
    # a replicate is Σ achieved of its draw / window length.
    with np.errstate(invalid="ignore", divide="ignore"):
        if closed_loop:
            per_busy = (busy.sum() / length) / busy_r
            rates = [r * per_busy for r in (tok_r, end_r, gtok_r, gend_r)]
        else:
            rates = [r / length for r in (tok_r, end_r, gtok_r, gend_r)]
        reps = {
            "output_tok_s": rates[0], "req_s": rates[1],
            "goodput_tok_s": rates[2], "goodput_req_s": rates[3],
            "slo_attainment": good_r / lived_r,
            "ttft_p50_s": draws.quantiles(ttft, 0.50, lat),
            "ttft_p99_s": draws.quantiles(ttft, 0.99, lat),
            "tpot_p50_s": draws.quantiles(tpot, 0.50, lat),
            "tpot_p99_s": draws.quantiles(tpot, 0.99, lat),
            "e2e_p50_s": draws.quantiles(e2e, 0.50, lat),
            "accept_length": sout_r / sver_r,
        }
    row: dict = {"window_start": win.start, "window_end": win.end, "window_s": win.length_s,
                 "steady": win.steady, "ramp_s": win.ramp_s, "drain_s": win.drain_s,
                 "window_requests": int(lived.sum()), "measured_requests": len(req),
                 "measured_tokens": float(np.nansum(np.where(ok, out, 0.0)))}
    for name in METRICS:
        row[name] = float(point[name])
        row[f"{name}_lo"], row[f"{name}_hi"] = interval(reps[name])
    return row, reps


IDENTITY = ["cell_id", "variant", "workload", "concurrency", "rate", "status", "engine",
            "simulated", "client_saturated", "error_rate", "requests_error", "num_requests",
            "factors", "engine_version", "cache_hit_rate", "accept_length_source", "error"]


def analyse_cells(cells: pd.DataFrame, requests: pd.DataFrame, slo: Slo | None = None,
                  replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> CellStats:
    """Every committed cell (any status) with its windowed metrics and intervals; cells that
    are not done, or have no request rows, keep NaN metrics."""
    slo = slo or Slo()
    # One BLAS thread: the per-cell products are small, and BLAS threads competing for two
    # busy cores made them twice as slow.
    with threadpool_limits(limits=1, user_api="blas"):
        return _analyse_cells(cells, requests, slo, replicates, seed)


def _analyse_cells(cells: pd.DataFrame, requests: pd.DataFrame, slo: Slo, replicates: int,
                   seed: int) -> CellStats:
    rows, reps = [], {}
    groups = {k: g for k, g in requests.groupby("cell_id", observed=True, sort=False)}
    for _, cell in cells.iterrows():
        base: dict[str, Any] = {k: cell.get(k) for k in IDENTITY}
        base["variant"], base["workload"] = str(cell.variant), str(cell.workload)
        base["repeat"] = repeat_of(cell)
        req = groups.get(cell.cell_id)
        # A cell that did not finish shows no figures (its status and reason say what
        # happened): a server that died mid-cell would otherwise read as measured at zero.
        if req is not None and len(req) and cell.get("status") == "done":
            closed = pd.isna(cell.rate)
            concurrency = None if pd.isna(cell.concurrency) else int(cell.concurrency)
            stats, reps[cell.cell_id] = analyse_cell(
                req, concurrency, closed, slo, replicates, seed_for(str(cell.cell_id), seed))
            base.update(stats)
            half = (base["output_tok_s_hi"] - base["output_tok_s_lo"]) / 2
            base["loose_interval"] = bool(
                base["window_requests"] < MIN_WINDOW_REQUESTS
                or not half <= LOOSE_INTERVAL * base["output_tok_s"])
        if cell.get("status") == "done" and cell.get("accept_length_source") == "server_metrics" \
                and pd.notna(
                cell.get("accept_length")) and not np.isfinite(base.get("accept_length", np.nan)):
            # An endpoint without per-request verify counts (OpenAI chat): the cell's figure
            # from the server's counters over the cell, one number with no interval (there is
            # nothing per request to resample).
            base["accept_length"] = float(cell.accept_length)
        rows.append(base)
    table = pd.DataFrame(rows, columns=[*IDENTITY, "repeat"] if not rows else None)
    # Cells without request rows (a run of failed cells) still get every column.
    for name in (*METRICS, *(f"{m}_{end}" for m in METRICS for end in ("lo", "hi")),
                 "window_start", "window_end", "window_s", "ramp_s", "drain_s",
                 "window_requests", "measured_requests", "measured_tokens"):
        if name not in table:
            table[name] = np.nan
    for name, default in (("steady", True), ("loose_interval", False)):
        if name not in table:
            table[name] = default
    return CellStats(table, reps, slo, replicates)
