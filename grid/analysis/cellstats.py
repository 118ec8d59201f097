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

from grid.analysis.bootstrap import DEFAULT_REPLICATES, Resample, seed_for
from grid.analysis.goodput import Slo, good_requests
from grid.analysis.setups import join, setups, split, with_hardware
from specgrid_metrics.intervals import METRICS, RequestArrays, cell_intervals

REQUEST_COLUMNS = ["cell_id", "status", "sent_at", "ttft_s", "tpot_s", "e2e_s",
                   "output_tokens", "spec_verify_ct"]
"""The request columns the analysis reads (never the per-token lists)."""
# METRICS (specgrid_metrics/intervals.py): the cell metrics that get an interval.
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


def analyse_cell(req: pd.DataFrame, concurrency: int | None, closed_loop: bool, slo: Slo,
                 replicates: int, seed: int) -> tuple[dict, dict[str, np.ndarray]]:
    """Point estimates, intervals and replicates of one cell from its request rows
    (specgrid_metrics/intervals.py, which the load generator's precision check shares)."""
    arrays = request_arrays(req)
    good = good_requests(arrays.ok, arrays.ttft, arrays.tpot, arrays.e2e, arrays.output_tokens,
                         slo)
    row, reps = cell_intervals(arrays, concurrency, closed_loop, replicates, seed, good=good)
    decode = decode_replicates(arrays, replicates, seed)
    if decode is not None:
        reps[DECODE_FACTOR] = decode
    return row, reps


DECODE_FACTOR = "accept_length_decode_factor"
"""The replicates key of `decode_replicates`."""


def decode_replicates(arrays: RequestArrays, replicates: int, seed: int) -> np.ndarray | None:
    """Replicates of the decode accept length relative to its value over all the cell's
    requests: Σ(output tokens - 1) / Σ verify steps over the completed requests with verify
    steps, each replicate over that figure of the whole sample (about 1). Relative, because the
    cells column `accept_length_decode` may be the engine's own figure (vLLM's counters: 1 +
    accepted / drafts, 5.00 for a drafter that is always accepted where the requests' count
    gives 4.85, each request's last step cut short); the curve multiplies it by this factor.
    From the same draw as the cell's other replicates (`cell_intervals` draws
    `Resample.draw(n, replicates, seed)`): replicate j of it and of the throughput resample
    the same requests (the surface pairs them, grid/analysis/surface/cells.py). None
    without verify steps."""
    verify, out = arrays.verify, arrays.output_tokens
    if verify is None:
        return None
    spec = arrays.ok & np.isfinite(verify) & (verify > 0) & (out >= 1)
    if not spec.any():
        return None
    sums = Resample.draw(len(arrays), replicates, seed).sums(
        np.column_stack([np.where(spec, out - 1.0, 0.0), np.where(spec, verify, 0.0)]))
    whole = float(np.where(spec, out - 1.0, 0.0).sum() / np.where(spec, verify, 0.0).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[:, 0] / sums[:, 1] / whole


def request_arrays(req: pd.DataFrame) -> RequestArrays:
    """The REQUEST_COLUMNS of one cell's rows as arrays."""
    return RequestArrays(
        sent=req.sent_at.to_numpy(dtype=float),
        ttft=req.ttft_s.to_numpy(dtype=float, na_value=np.nan),
        tpot=req.tpot_s.to_numpy(dtype=float, na_value=np.nan),
        e2e=req.e2e_s.to_numpy(dtype=float, na_value=np.nan),
        output_tokens=req.output_tokens.to_numpy(dtype=float, na_value=np.nan),
        ok=(req.status == "ok").to_numpy(),
        verify=req.spec_verify_ct.to_numpy(dtype=float, na_value=np.nan))


IDENTITY = ["cell_id", "variant", "workload", "concurrency", "rate", "status", "engine",
            "simulated", "client_saturated", "error_rate", "requests_error", "num_requests",
            "factors", "engine_version", "cache_hit_rate", "accept_length_source", "error",
            "stop_reason", "forced_acceptance", "model", "hardware"]


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
    # Each variant labelled with its setup (engine, model, hardware where the grid varies
    # them, grid/analysis/setups.py): a comparison pairs only cells of one setup.
    cells = with_hardware(cells)
    _, setup = setups(cells)
    for (_, cell), cell_setup in zip(cells.iterrows(), setup, strict=True):
        base: dict[str, Any] = {k: cell.get(k) for k in IDENTITY}
        base["variant"] = join(cell_setup, split(str(cell.variant))[1])
        base["workload"], base["setup"] = str(cell.workload), cell_setup
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
    table = pd.DataFrame(rows, columns=[*IDENTITY, "setup", "repeat"] if not rows else None)
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
