"""Chunk-level data through Parquet, and accept length: SGLang's per-request definition, the
decode-only one, and the cell's from the server's /metrics counters
(specgrid_metrics/acceptance.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from actors.loadgen.runner import run_load
from actors.loadgen.sinks import NativeSink
from actors.loadgen.spec import LoadSpec, Prompt
from actors.loadgen.timeline import Timeline
from engines.metrics import SGLANG_METRICS
from grid.loader import load_requests
from grid.store.clientstats import cell_columns, merge_client_stats
from grid.store.results import write_cell
from specgrid_metrics.counters import counter_delta
from specgrid_metrics.requests import itl_gaps
from tests.actors.test_sse import ListStream, native_stream

PROMPTS = (Prompt("p", "hello", "d"),)


def _pieces(counts: list[int], verify: int | None) -> list[bytes]:
    raw = native_stream(counts, verify=verify)
    return [e + b"\n\n" for e in raw.split(b"\n\n") if e]


def test_chunk_series_round_trip_through_parquet(tmp_path: Path) -> None:
    counts = [1, 3, 4, 7, 8, 11]  # chunks of 1, 2, 1, 3, 1, 3 tokens
    transport = httpx.MockTransport(
        lambda r: httpx.Response(200, stream=ListStream(_pieces(counts, 4), gap_s=0.003)))
    res = asyncio.run(run_load(LoadSpec(url="http://t", prompts=PROMPTS, concurrency=2,
                                        num_requests=4), transport))
    rows = [dict(r, run_id="r", cell_id="c", engine="sim", simulated=True, concurrency=2,
                 rate=None, attempt=1) for r in res.rows]
    write_cell(tmp_path, variant="v", workload="w", cell_id="c", attempt=1, requests=rows,
               cell_row={"run_id": "r", "cell_id": "c", "attempt": 1, "status": "done"})
    back = load_requests(tmp_path).sort_values("request_id")
    assert len(back) == 4
    for row, (_, got) in zip(sorted(rows, key=lambda r: r["request_id"]), back.iterrows(),
                             strict=True):
        assert list(got.chunk_tokens) == row["chunk_tokens"] == [1, 2, 1, 3, 1, 3]
        assert list(got.chunk_offset_us) == row["chunk_offset_us"]
        assert list(got.chunk_gap_s) == row["chunk_gap_s"] and len(row["chunk_gap_s"]) == 5
        assert got.merged_reads == 0
        # the split ITL is rebuilt from the stored chunk series (µs-rounded offsets)
        rebuilt = itl_gaps([t / 1e6 for t in got.chunk_offset_us], list(got.chunk_tokens))
        assert list(got.itl_s) == pytest.approx(rebuilt, abs=2e-6)
        assert got.chunk_offset_us[0] == round(got.ttft_s * 1e6)
        assert all(g > 0.002 for g in got.chunk_gap_s)  # one gap per chunk, not split


def _sink_result(events: list[bytes]) -> Timeline:
    tl = Timeline(0.0)
    sink = NativeSink(tl)
    for i, e in enumerate(events):
        sink.feed(e, float(i))
    sink.finish()
    return tl


def _final(meta_extra: dict[str, object], n: int) -> bytes:
    meta = {"completion_tokens": n, "prompt_tokens": 3,
            "finish_reason": {"type": "length", "length": n}, **meta_extra}
    return b"data: " + json.dumps({"text": "t", "meta_info": meta}).encode() + b"\n\n"


@pytest.mark.parametrize("meta, verify", [
    ({"spec_verify_ct": 5}, 5),                    # SGLang 0.5.x final meta_info
    ({"spec_accept_length": 16 / 5}, 5),           # servers that report only the ratio
    ({}, None),                                    # no speculation
])
def test_accept_length_variants_on_constructed_streams(meta: dict[str, object],
                                                       verify: int | None) -> None:
    tl = _sink_result([_final({}, 6).replace(b'"finish_reason": {"type": "length", "length": 6}',
                                              b'"finish_reason": null'),
                       _final(meta, 16), b"data: [DONE]\n\n"])
    assert tl.output_tokens == 16 and tl.spec_verify_ct == verify
    rows = [{"status": "ok", "output_tokens": 16, "spec_verify_ct": verify}] * 3
    cols = cell_columns(rows, {"transport": "raw"}, endpoint="generate")
    if verify is None:
        assert cols["accept_length_decode"] is None and cols["accept_length_source"] is None
    else:
        assert cols["accept_length_decode"] == pytest.approx(15 / 5)  # SGLang's: 16/5
        assert cols["accept_length_source"] == "requests"


@pytest.mark.parametrize("meta, verify, hist", [
    # SGLang 0.5.23: 16 tokens = the prefill's 1 + 5 verifies + 10 drafts (1x0, 1x1, 3x3)
    ({"spec_verify_ct": 5, "spec_correct_drafts_histogram": [1, 1, 0, 3]}, 5, [1, 1, 0, 3]),
    # zero draft tokens: the histogram alone, 15 one-token verifies after the prefill's token
    ({"spec_correct_drafts_histogram": [15]}, 15, [15]),
    ({"spec_correct_drafts_histogram": "x"}, None, None),  # not a histogram: ignored
])
def test_native_final_meta_gives_the_acceptance_histogram(meta: dict[str, object],
                                                          verify: int | None,
                                                          hist: list[int] | None) -> None:
    tl = _sink_result([_final(meta, 16), b"data: [DONE]\n\n"])
    assert tl.spec_verify_ct == verify and tl.accept_histogram == hist


def test_acceptance_histogram_round_trip_through_parquet(tmp_path: Path) -> None:
    final = _final({"spec_verify_ct": 5, "spec_correct_drafts_histogram": [1, 1, 0, 3]}, 16)
    transport = httpx.MockTransport(
        lambda r: httpx.Response(200, stream=ListStream([final, b"data: [DONE]\n\n"])))
    res = asyncio.run(run_load(LoadSpec(url="http://t", prompts=PROMPTS, concurrency=1,
                                        num_requests=2), transport))
    rows = [dict(r, run_id="r", cell_id="c", engine="sim", simulated=True, concurrency=1,
                 rate=None, attempt=1) for r in res.rows]
    assert [r["accept_histogram"] for r in rows] == [[1, 1, 0, 3]] * 2
    write_cell(tmp_path, variant="v", workload="w", cell_id="c", attempt=1, requests=rows,
               cell_row={"run_id": "r", "cell_id": "c", "attempt": 1, "status": "done"})
    back = load_requests(tmp_path)
    assert [list(h) for h in back.accept_histogram] == [[1, 1, 0, 3]] * 2


def _samples(before: dict[str, float], after: dict[str, float], labels: dict[str, str]
             ) -> list[tuple[float, str, dict[str, str], float]]:
    return ([(1.0, k, labels, v) for k, v in before.items()]
            + [(2.0, k, labels, v) for k, v in after.items()])


def test_cell_accept_length_from_server_counters_on_chat() -> None:
    names = ("sglang:generation_tokens_total", "sglang:spec_verify_calls_total",
             "sglang:num_requests_total")
    r0 = dict(zip(names, (1000.0, 400.0, 10.0), strict=True))
    r1 = dict(zip(names, (1640.0, 600.0, 50.0), strict=True))  # +640 tokens, +200 verify, +40
    samples = _samples(r0, r1, {"tp_rank": "0"})
    samples += _samples({names[0]: 5.0}, {names[0]: 5.0}, {"tp_rank": "1"})  # unchanged series
    samples += [(1.5, "sglang:spec_accept_length", {}, 9.0)]  # a gauge: ignored
    assert counter_delta(samples, names[0]) == 640.0
    got = SGLANG_METRICS.accept_length(samples)
    assert got == {"accept_length": 3.2, "accept_length_decode": 3.0,
                   "acceptance_per_position": None, "accept_length_source": "server_metrics"}
    cols = cell_columns([{"status": "ok", "output_tokens": 16, "spec_verify_ct": None}],
                        {}, samples, endpoint="chat")
    assert cols["accept_length"] == 3.2 and cols["accept_length_source"] == "server_metrics"


def test_server_counters_missing_or_reset() -> None:
    assert SGLANG_METRICS.accept_length([])["accept_length_source"] is None
    reset = [(1.0, "sglang:generation_tokens_total", {}, 500.0),
             (2.0, "sglang:generation_tokens_total", {}, 30.0),  # restarted: counts from 0
             (1.0, "sglang:spec_verify_calls_total", {}, 100.0),
             (2.0, "sglang:spec_verify_calls_total", {}, 10.0)]
    assert SGLANG_METRICS.accept_length(reset)["accept_length"] == 3.0
    no_spec = [(1.0, "sglang:generation_tokens_total", {}, 0.0),
               (2.0, "sglang:generation_tokens_total", {}, 99.0)]
    assert SGLANG_METRICS.accept_length(no_spec)["accept_length"] is None


def test_merge_client_stats_rates_and_merged_reads() -> None:
    a = {"window_start": 10.0, "window_end": 20.0, "offered_rate_req_s": 5.0,
         "first_sent_at": 10.0, "last_sent_at": 19.0, "sent_requests": 46, "merged_reads": 2,
         "chunk_gaps": 100, "client_saturated": False, "transport": "raw"}
    b = {**a, "first_sent_at": 10.5, "last_sent_at": 20.0, "sent_requests": 45,
         "merged_reads": 0, "chunk_gaps": 300, "client_saturated": True,
         "saturation_reason": "x"}
    m = merge_client_stats([a, b])
    assert m["offered_rate_req_s"] == 10.0
    assert m["achieved_rate_req_s"] == pytest.approx(90 / 10.0)
    assert m["merged_reads"] == 2 and m["merged_read_fraction"] == pytest.approx(2 / 400)
    assert m["client_saturated"] and m["saturation_reason"] == "x"
