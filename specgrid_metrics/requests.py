"""Metric math for specgrid: pure functions, no Ray, no sockets, no numpy. The definitions
(TTFT, ITL, E2E, TPOT, accept length, dispatch lag, throughput) are docs/architecture.md's
("Metric definitions"), repeated in each function. Percentiles use linear interpolation between
closest ranks (numpy's default ``"linear"``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    frac = pos - lo
    return float(xs[lo] + (xs[hi] - xs[lo]) * frac)


def ttft(sent: float, first_token_at: float | None) -> float | None:
    """TTFT = first content token arrival - request sent (None when no token arrived)."""
    if first_token_at is None:
        return None
    return first_token_at - sent


def itl_gaps(chunk_times: Sequence[float], chunk_tokens: Sequence[int]) -> list[float]:
    """ITL = per-token gaps. ``chunk_times[j]`` is the arrival of content chunk j, which carries
    ``chunk_tokens[j]`` (k >= 1) new tokens. Chunk j >= 1 contributes k entries of
    (chunk_times[j] - chunk_times[j-1]) / k; the first chunk contributes none (it is TTFT)."""
    if len(chunk_times) != len(chunk_tokens):
        raise ValueError("chunk_times and chunk_tokens differ in length")
    out: list[float] = []
    prev = None
    for t, k in zip(chunk_times, chunk_tokens, strict=True):
        if k < 1:
            raise ValueError(f"a content chunk carries >= 1 token, got {k}")
        if prev is not None:
            g = (t - prev) / k
            if k == 1:
                out.append(g)
            else:
                out.extend([g] * k)
        prev = t
    return out


def tpot(e2e: float | None, ttft_s: float | None, output_tokens: int | None) -> float | None:
    """TPOT = (E2E - TTFT) / (output_tokens - 1); None when undefined (< 2 tokens, no TTFT)."""
    if e2e is None or ttft_s is None or output_tokens is None or output_tokens < 2:
        return None
    return (e2e - ttft_s) / (output_tokens - 1)


def accept_length(completion_tokens: int | None, spec_verify_ct: int | None) -> float | None:
    """Accept length of one request = completion_tokens / spec_verify_ct (its own final
    meta_info); None without speculation (spec_verify_ct missing or 0)."""
    if completion_tokens is None or not spec_verify_ct:
        return None
    return completion_tokens / spec_verify_ct


def request_timing(
    sent: float,
    chunk_times: Sequence[float],
    chunk_tokens: Sequence[int],
    end: float | None,
    output_tokens: int | None = None,
) -> dict[str, Any]:
    """Timing of one request from its timeline (all times on one clock, seconds).

    ``sent``: request sent; ``chunk_times``/``chunk_tokens``: arrival and Δtokens of each
    content chunk (chunks without new tokens excluded); ``end``: stream end (None if it never
    ended); ``output_tokens``: the server's final completion_tokens (defaults to Σ chunk_tokens).
    Returns ``ttft_s``, ``e2e_s``, ``tpot_s``, ``itl_s`` by the module's definitions.
    """
    n_out = output_tokens if output_tokens is not None else sum(chunk_tokens)
    t_first = ttft(sent, chunk_times[0]) if chunk_times else None
    e2e = None if end is None else end - sent
    return {
        "ttft_s": t_first,
        "e2e_s": e2e,
        "tpot_s": tpot(e2e, t_first, n_out),
        "itl_s": itl_gaps(chunk_times, chunk_tokens),
    }


def dispatch_lag(scheduled_at: float, sent_at: float) -> float:
    """Dispatch lag = sent_at - scheduled_at (seconds)."""
    return sent_at - scheduled_at


def throughput(output_tokens: Iterable[int | None], window_s: float) -> float:
    """Throughput = Σ output tokens of completed requests / load-window wall time (tokens/s).
    Pass the output_tokens of completed requests only."""
    if window_s <= 0:
        return 0.0
    return sum(n for n in output_tokens if n) / window_s


def _ok(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


def cell_accept_length(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """Accept length of a cell = Σ output_tokens / Σ spec_verify_ct over its completed requests
    that report spec_verify_ct > 0 (never the server's lifetime average); None without any."""
    num = 0
    den = 0
    for r in _ok(rows):
        v = r.get("spec_verify_ct")
        n = r.get("output_tokens")
        if v and n is not None:
            num += n
            den += v
    return num / den if den else None


def _pcts(values: Sequence[float], name: str) -> dict[str, float | None]:
    return {f"{name}_p{q}_s": percentile(values, q) for q in (50, 90, 99)}


def summarize_cell(
    rows: Sequence[Mapping[str, Any]],
    window_s: float,
    stats: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Aggregates of one cell from its request rows.

    ``window_s``: load-window wall time (first measured request scheduled -> last measured
    request ended). ``stats``: the load generator's self-check (``client_saturated``,
    ``saturation_reason``, ``dispatch_lag_p50_s``/``p99_s``); dispatch lag is computed from the
    rows when absent. Returns requests_ok, requests_error, error_rate (errors / all),
    output_tok_s (throughput: output tokens of completed requests / window_s), req_s (completed
    requests / window_s), ttft/tpot/itl/e2e p50/p90/p99 in seconds over completed requests (ITL
    over all their per-token gaps), accept_length (Σ completion / Σ spec_verify_ct),
    duration_s, client_saturated, saturation_reason, dispatch_lag_p50_s, dispatch_lag_p99_s.
    """
    stats = stats or {}
    ok = _ok(rows)
    n_err = len(rows) - len(ok)
    out: dict[str, Any] = {
        "requests_ok": len(ok),
        "requests_error": n_err,
        "error_rate": n_err / len(rows) if rows else 0.0,
        "output_tok_s": throughput((r.get("output_tokens") for r in ok), window_s),
        "req_s": len(ok) / window_s if window_s > 0 else 0.0,
    }
    for name in ("ttft", "tpot", "e2e"):
        vals = [r[f"{name}_s"] for r in ok if r.get(f"{name}_s") is not None]
        out.update(_pcts(vals, name))
    itl: list[float] = []
    for r in ok:
        itl.extend(r.get("itl_s") or ())
    out.update(_pcts(itl, "itl"))
    out["accept_length"] = cell_accept_length(rows)
    out["duration_s"] = window_s
    out["client_saturated"] = bool(stats.get("client_saturated", False))
    out["saturation_reason"] = stats.get("saturation_reason")
    if "dispatch_lag_p50_s" in stats and "dispatch_lag_p99_s" in stats:
        out["dispatch_lag_p50_s"] = stats["dispatch_lag_p50_s"]
        out["dispatch_lag_p99_s"] = stats["dispatch_lag_p99_s"]
    else:
        lags = [
            dispatch_lag(r["scheduled_at"], r["sent_at"])
            for r in rows
            if r.get("scheduled_at") is not None and r.get("sent_at") is not None
        ]
        out["dispatch_lag_p50_s"] = percentile(lags, 50)
        out["dispatch_lag_p99_s"] = percentile(lags, 99)
    return out
