"""One cell's load-generator columns from its clients' stats and rows (pure: no Ray, no
sockets).

The driver calls :func:`merge_client_stats` on the ``LoadResult.stats`` of a cell's clients and
:func:`cell_columns` for the cell row's load-generator columns (grid/store/schema.py CELL_FIELDS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engines.metrics import MetricNames, detect_family
from specgrid_metrics.acceptance import cell_accept_length_decode
from specgrid_metrics.counters import Sample
from specgrid_metrics.requests import percentile

_WORST = ("dispatch_lag_p50_s", "dispatch_lag_p99_s", "client_dispatch_lag_p99_s",
          "loop_lag_p50_s", "loop_lag_p99_s", "client_cpu_percent", "start_late_s")


def merge_client_stats(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell's stats from its clients': the window spans all of them; lags, CPU and lateness
    take the worst client; merged reads add up; rates: offered = Σ clients' shares, achieved =
    all sends over the span from the first to the last send of any client."""
    merged = dict(stats[0])
    merged["window_start"] = min(s["window_start"] for s in stats)
    merged["window_end"] = max(s["window_end"] for s in stats)
    for key in _WORST:
        values = [s[key] for s in stats if s.get(key) is not None]
        merged[key] = max(values) if values else None
    reasons = [s["saturation_reason"] for s in stats if s.get("client_saturated")]
    merged["client_saturated"] = bool(reasons)
    merged["saturation_reason"] = "; ".join(reasons) if reasons else None
    merged["merged_reads"] = sum(s.get("merged_reads") or 0 for s in stats)
    gaps = sum(s.get("chunk_gaps") or 0 for s in stats)
    merged["chunk_gaps"] = gaps
    merged["merged_read_fraction"] = merged["merged_reads"] / gaps if gaps else 0.0
    offered = [s.get("offered_rate_req_s") for s in stats]
    merged["offered_rate_req_s"] = (sum(o for o in offered if o is not None)
                                    if all(o is not None for o in offered) else None)
    firsts = [s["first_sent_at"] for s in stats if s.get("first_sent_at") is not None]
    lasts = [s["last_sent_at"] for s in stats if s.get("last_sent_at") is not None]
    sent = sum(s.get("sent_requests") or 0 for s in stats)
    span = max(lasts) - min(firsts) if firsts and lasts else 0.0
    merged["sent_requests"] = sent
    merged["achieved_rate_req_s"] = (sent - 1) / span if sent >= 2 and span > 0 else None
    return merged


def cell_columns(
    rows: Sequence[Mapping[str, Any]],
    stats: Mapping[str, Any],
    server_samples: Sequence[Sample] = (),
    endpoint: str = "generate",
    metrics: MetricNames | None = None,
) -> dict[str, Any]:
    """The cell row's load-generator columns (grid/store/schema.py): transport, chunk-gap
    percentiles over completed requests, decode-only accept length, rates, self-check figures.
    On an endpoint without per-request verify counts (``chat``) the accept lengths come from the
    server's ``/metrics`` counter deltas over the cell (``server_samples``) and
    ``accept_length_source`` says so; on ``generate`` from the requests (``"requests"``). The
    ``accept_length`` key is included only when it comes from the server (the row's own is
    summarize_cell's, from the requests). `metrics` names the engine's series (None: the family
    is told from the scraped names, as for a server someone else runs); vLLM's per-position
    acceptance comes from the counters on every endpoint. Where the server reports its own
    first-token latency (SGLang's native stream), ``ttft_minus_server_*`` compare each
    request's client TTFT with it."""
    ok = [r for r in rows if r.get("status") == "ok"]
    gaps: list[float] = []
    for r in ok:
        gaps.extend(r.get("chunk_gap_s") or ())
    out: dict[str, Any] = {f"chunk_gap_p{q}_s": percentile(gaps, q) for q in (50, 90, 99)}
    out["transport"] = stats.get("transport")
    for key in ("offered_rate_req_s", "achieved_rate_req_s", "start_late_s",
                "client_dispatch_lag_p99_s", "loop_lag_p99_s", "client_cpu_percent",
                "merged_reads", "merged_read_fraction"):
        out[key] = stats.get(key)
    behind = [r["ttft_s"] - r["server_ttft_s"] for r in ok
              if r.get("ttft_s") is not None and r.get("server_ttft_s") is not None]
    out["ttft_minus_server_p50_s"] = percentile(behind, 50)
    out["ttft_minus_server_p99_s"] = percentile(behind, 99)
    names = metrics or detect_family(name for _, name, _, _ in server_samples)
    counters = names.accept_length(server_samples) if names else None
    if endpoint == "generate":
        decode = cell_accept_length_decode(rows)
        out["accept_length_decode"] = decode
        out["accept_length_source"] = "requests" if decode is not None else None
    elif counters is not None:
        out.update({k: v for k, v in counters.items() if k != "acceptance_per_position"})
    else:
        out.update(accept_length=None, accept_length_decode=None, accept_length_source=None)
    out["acceptance_per_position"] = counters["acceptance_per_position"] if counters else None
    return out
