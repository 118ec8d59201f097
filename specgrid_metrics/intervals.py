"""One cell's metrics over its steady-state window, each with its seeded bootstrap interval over
the cell's requests: the one implementation behind the report's per-cell table
(grid/analysis/cellstats.py) and the load generator's precision check
(specgrid_metrics/precision.py), so that a cell stops when the interval the report will show is
tight enough, by the same computation.

Pure numpy; the arrays are one entry per measured request (errors included: an error occupies
its stream while it lasts).

Metric names: ``output_tok_s``, ``req_s``, ``goodput_tok_s``, ``goodput_req_s``,
``slo_attainment``, ``accept_length`` and latency percentiles ``<ttft|tpot|e2e>_p<q>_s`` (q in
(0, 100), e.g. ``ttft_p50_s``, ``tpot_p99_s``), taken over the completed requests that lived
entirely inside the window."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specgrid_metrics.bootstrap import Resample, interval
from specgrid_metrics.window import Window, ended_inside, inside, steady_window, tokens_in_window

METRICS = ("output_tok_s", "req_s", "goodput_tok_s", "goodput_req_s", "slo_attainment",
           "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "accept_length")
"""The metrics the report gives an interval (`<metric>_lo`, `<metric>_hi`), in the order their
replicates are drawn (the quantiles draw from one generator in this order, so the same order
gives the same intervals)."""
RATES = ("output_tok_s", "req_s", "goodput_tok_s", "goodput_req_s")
_PERCENTILE = re.compile(r"^(ttft|tpot|e2e)_p(\d+(?:\.\d+)?)_s$")


def percentile_of(metric: str) -> tuple[str, float] | None:
    """(latency, q in 0..1) of a percentile metric name (`ttft_p99_s` -> ("ttft", 0.99)); None
    for any other name or a q outside (0, 100)."""
    m = _PERCENTILE.match(metric)
    if m is None:
        return None
    q = float(m.group(2)) / 100.0
    return (m.group(1), q) if 0.0 < q < 1.0 else None


@dataclass(frozen=True)
class RequestArrays:
    """A cell's measured requests as arrays (float seconds; NaN where unknown)."""

    sent: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    output_tokens: np.ndarray
    ok: np.ndarray
    """Boolean: the request completed (`status == "ok"`)."""
    verify: np.ndarray | None = None
    """spec_verify_ct per request (accept length); None = no speculation counts."""

    def __len__(self) -> int:
        return int(self.sent.size)

    @property
    def end(self) -> np.ndarray:
        return self.sent + self.e2e


def _pcts(values: np.ndarray, qs: list[float]) -> list[float]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return [float("nan")] * len(qs)
    return [float(v) for v in np.percentile(finite, qs)]


def cell_window(req: RequestArrays, concurrency: int | None, closed_loop: bool) -> Window:
    """The cell's steady-state window (specgrid_metrics/window.py); when too few requests
    were sent for any to live inside it, the whole span (first send to last end)."""
    sent, end = req.sent, req.end
    win = steady_window(sent, end, concurrency, closed_loop)
    if win.steady and not inside(sent, end, win).any():
        last = np.where(np.isfinite(end), end, sent)
        win = Window(float(np.nanmin(sent)), float(np.nanmax(last)), False, 0.0, 0.0)
    return win


def cell_intervals(req: RequestArrays, concurrency: int | None, closed_loop: bool,
                   replicates: int, seed: int, good: np.ndarray | None = None,
                   window: Window | None = None, metrics: Sequence[str] = METRICS
                   ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Point estimates, intervals (`<m>_lo`, `<m>_hi`) and the window's facts of one cell, and
    each metric's replicates. `good`: the requests that met the SLOs (goodput; default: the
    completed ones); `window`: use this window instead of the cell's own (the load
    generator's check, mid-cell: the part of the window its finished requests determine)."""
    sent, ttft, tpot, e2e = req.sent, req.ttft, req.tpot, req.e2e
    out, ok = req.output_tokens, np.asarray(req.ok, dtype=bool)
    verify = req.verify if req.verify is not None else np.full(len(req), np.nan)
    end = req.end
    win = window if window is not None else cell_window(req, concurrency, closed_loop)
    length = max(win.length_s, 1e-9)
    good = ok if good is None else np.asarray(good, dtype=bool)
    tokens = np.where(ok, tokens_in_window(sent, ttft, e2e, out, win), 0.0)
    lived = inside(sent, end, win)
    ended = ended_inside(end, win) & ok
    lat = lived & ok
    spec = ok & np.isfinite(verify) & (verify > 0)
    spec_out, spec_verify = np.where(spec, out, 0.0), np.where(spec, verify, 0.0)
    latency = {"ttft": ttft, "tpot": tpot, "e2e": e2e}

    point: dict[str, float] = {
        "output_tok_s": tokens.sum() / length,
        "req_s": ended.sum() / length,
        "goodput_tok_s": (tokens * good).sum() / length,
        "goodput_req_s": (ended & good).sum() / length,
        "slo_attainment": good[lived].mean() if lived.any() else float("nan"),
        "accept_length": spec_out.sum() / spec_verify.sum() if spec_verify.sum() else np.nan,
    }
    for name in metrics:
        pct = percentile_of(name)
        if pct is not None:
            point[name] = _pcts(latency[pct[0]][lat], [pct[1] * 100.0])[0]
    draws = Resample.draw(len(req), replicates, seed)
    # Every sum of the cell in one product: columns of `summed` in this order.
    busy = np.nan_to_num(np.clip(np.minimum(end, win.end) - np.maximum(sent, win.start),
                                 0.0, None))
    summed = np.column_stack([tokens, ended, tokens * good, ended & good, good & lived, lived,
                              spec_out, spec_verify, busy])
    totals = draws.sums(summed)
    tok_r, end_r, gtok_r, gend_r, good_r, lived_r, sout_r, sver_r, busy_r = totals.T
    reps: dict[str, np.ndarray] = {}
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
        reps.update(zip(RATES, rates, strict=True))
        reps["slo_attainment"] = good_r / lived_r
        for name in metrics:  # the quantiles in the order asked (module doc)
            pct = percentile_of(name)
            if pct is not None:
                reps[name] = draws.quantiles(latency[pct[0]], pct[1], lat)
        reps["accept_length"] = sout_r / sver_r
    row: dict[str, float] = {
        "window_start": win.start, "window_end": win.end, "window_s": win.length_s,
        "steady": win.steady, "ramp_s": win.ramp_s, "drain_s": win.drain_s,
        "window_requests": int(lived.sum()), "measured_requests": len(req),
        "measured_tokens": float(np.nansum(np.where(ok, out, 0.0)))}
    for name in metrics:
        row[name] = float(point[name])
        row[f"{name}_lo"], row[f"{name}_hi"] = interval(reps[name])
    return row, {name: reps[name] for name in metrics}


def relative_half_width(row: dict[str, float], metric: str) -> float:
    """(hi - lo) / 2 / estimate of `metric` in a `cell_intervals` row: the report's measure of
    how tight an interval is (inf where there is no interval or the estimate is 0)."""
    point, lo, hi = row.get(metric), row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if point is None or lo is None or hi is None:
        return float("inf")
    half = (hi - lo) / 2.0
    if not (np.isfinite(half) and np.isfinite(point)) or point == 0:
        return float("inf")
    return float(abs(half / point))
