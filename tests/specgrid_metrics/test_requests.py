"""Metric math on constructed timelines (specgrid_metrics/requests.py)."""

from __future__ import annotations

import math

import pytest

from specgrid_metrics import requests as m


def test_percentile_matches_numpy_linear() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert m.percentile(xs, 50) == 3.0
    assert m.percentile(xs, 0) == 1.0
    assert m.percentile(xs, 100) == 5.0
    assert m.percentile(xs, 90) == pytest.approx(4.6)  # numpy.percentile(xs, 90)
    assert m.percentile([], 50) is None
    assert m.percentile([7.0], 99) == 7.0


def test_ttft_is_first_token_arrival_minus_sent() -> None:
    assert m.ttft(10.0, 10.25) == pytest.approx(0.25)
    assert m.ttft(10.0, None) is None


def test_itl_splits_multi_token_chunks() -> None:
    # chunks at 1.0 (2 tokens: define TTFT), 1.3 (3 tokens), 1.4 (1 token)
    gaps = m.itl_gaps([1.0, 1.3, 1.4], [2, 3, 1])
    assert gaps == pytest.approx([0.1, 0.1, 0.1, 0.1])
    assert len(gaps) == 6 - 2  # output tokens - tokens of the first chunk
    assert m.itl_gaps([], []) == []
    assert m.itl_gaps([2.0], [4]) == []
    with pytest.raises(ValueError):
        m.itl_gaps([1.0, 2.0], [1])
    with pytest.raises(ValueError):
        m.itl_gaps([1.0, 2.0], [1, 0])


def test_tpot_definition() -> None:
    assert m.tpot(1.0, 0.1, 10) == pytest.approx(0.1)
    assert m.tpot(1.0, 0.1, 1) is None
    assert m.tpot(None, 0.1, 10) is None
    assert m.tpot(1.0, None, 10) is None


def test_request_timing_constructed_timeline() -> None:
    sent = 100.0
    times = [100.020, 100.030, 100.050, 100.060]
    toks = [1, 2, 1, 3]  # 7 tokens
    t = m.request_timing(sent, times, toks, end=100.061, output_tokens=7)
    assert t["ttft_s"] == pytest.approx(0.020)
    assert t["e2e_s"] == pytest.approx(0.061)
    assert t["tpot_s"] == pytest.approx((0.061 - 0.020) / 6)
    assert t["itl_s"] == pytest.approx([0.005, 0.005, 0.020, 0.01 / 3, 0.01 / 3, 0.01 / 3])
    # sum of ITL = last token arrival - first token arrival
    assert math.fsum(t["itl_s"]) == pytest.approx(0.040)
    empty = m.request_timing(sent, [], [], end=None)
    assert empty == {"ttft_s": None, "e2e_s": None, "tpot_s": None, "itl_s": []}


def test_accept_length_request_and_cell() -> None:
    assert m.accept_length(100, 40) == pytest.approx(2.5)
    assert m.accept_length(100, None) is None
    assert m.accept_length(100, 0) is None
    rows = [
        {"status": "ok", "output_tokens": 100, "spec_verify_ct": 50},
        {"status": "ok", "output_tokens": 30, "spec_verify_ct": 10},
        {"status": "ok", "output_tokens": 20, "spec_verify_ct": None},  # no speculation info
        {"status": "error", "output_tokens": 90, "spec_verify_ct": 10},  # not completed
    ]
    # Σ completion / Σ verify = 130 / 60, not the mean of per-request ratios (2.0 and 3.0)
    assert m.cell_accept_length(rows) == pytest.approx(130 / 60)
    assert m.cell_accept_length([{"status": "ok", "output_tokens": 5}]) is None


def test_dispatch_lag_and_throughput() -> None:
    assert m.dispatch_lag(10.0, 10.004) == pytest.approx(0.004)
    assert m.throughput([100, 200, None], 2.0) == pytest.approx(150.0)
    assert m.throughput([100], 0.0) == 0.0


def _row(status: str, ttft: float, e2e: float, n: int, sched: float, sent: float,
         itl: list[float], verify: int | None = None) -> dict[str, object]:
    return {
        "status": status, "ttft_s": ttft, "e2e_s": e2e, "output_tokens": n,
        "tpot_s": m.tpot(e2e, ttft, n), "itl_s": itl, "scheduled_at": sched, "sent_at": sent,
        "spec_verify_ct": verify,
    }


def test_summarize_cell() -> None:
    rows = [
        _row("ok", 0.1, 1.1, 11, 0.0, 0.001, [0.1] * 10, verify=5),
        _row("ok", 0.2, 2.2, 21, 0.5, 0.502, [0.1] * 20, verify=7),
        _row("ok", 0.3, 0.3, 1, 1.0, 1.010, []),
        _row("error", 5.0, 9.0, 3, 1.5, 1.5, [1.0, 1.0]),
    ]
    s = m.summarize_cell(rows, window_s=4.0)
    assert s["requests_ok"] == 3
    assert s["requests_error"] == 1
    assert s["error_rate"] == pytest.approx(0.25)
    assert s["output_tok_s"] == pytest.approx(33 / 4.0)  # error row's tokens not counted
    assert s["req_s"] == pytest.approx(3 / 4.0)
    assert s["ttft_p50_s"] == pytest.approx(0.2)
    assert s["ttft_p99_s"] == pytest.approx(0.298)
    # sorted e2e of ok rows [0.3, 1.1, 2.2]: p90 at rank 1.8 -> 1.1 + 0.8 x (2.2 - 1.1)
    assert s["e2e_p90_s"] == pytest.approx(1.98)
    assert s["tpot_p50_s"] == pytest.approx(0.1)  # the 1-token request has no TPOT
    assert s["itl_p99_s"] == pytest.approx(0.1)  # error row's 1.0 s gaps excluded
    assert s["accept_length"] == pytest.approx(32 / 12)
    assert s["duration_s"] == 4.0
    assert s["client_saturated"] is False
    assert s["saturation_reason"] is None
    # sorted lags [0.0, 0.001, 0.002, 0.010]: p50 at rank 1.5, p99 at rank 2.97
    assert s["dispatch_lag_p50_s"] == pytest.approx(0.0015)
    assert s["dispatch_lag_p99_s"] == pytest.approx(0.002 + 0.97 * 0.008)


def test_summarize_cell_uses_loadgen_stats_and_handles_empty() -> None:
    stats = {"client_saturated": True, "saturation_reason": "cpu", "dispatch_lag_p50_s": 0.5,
             "dispatch_lag_p99_s": 0.9}
    s = m.summarize_cell([], window_s=0.0, stats=stats)
    assert s["requests_ok"] == 0 and s["error_rate"] == 0.0 and s["output_tok_s"] == 0.0
    assert s["ttft_p50_s"] is None and s["itl_p99_s"] is None and s["accept_length"] is None
    assert s["client_saturated"] is True and s["saturation_reason"] == "cpu"
    assert s["dispatch_lag_p99_s"] == 0.9
