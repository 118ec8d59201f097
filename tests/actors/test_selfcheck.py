"""The load generator's self-check (actors/loadgen/selfcheck.py): every branch of the verdict
driven into a flag, the lag definitions on real runs, CPU over the steady window."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from actors.loadgen import selfcheck
from actors.loadgen.runner import run_load
from actors.loadgen.selfcheck import LoopLagMonitor, verdict
from actors.loadgen.spec import LoadSpec, Prompt

PROMPTS = (Prompt("p", "hello", "d"),)
HEALTHY = {"dispatch_lags": [0.0001] * 100, "client_lags": [0.0001] * 100,
           "loop_lags": [0.0002] * 100, "cpu_percent": 40.0, "merged_reads": 0,
           "chunk_gaps": 1000}


def test_healthy_inputs_are_not_flagged() -> None:
    v = verdict(**HEALTHY)  # type: ignore[arg-type]
    assert v["client_saturated"] is False and v["saturation_reason"] is None


@pytest.mark.parametrize("change, words", [
    ({"client_lags": [0.0001] * 98 + [0.0055] * 2}, "dispatch lag p99"),
    ({"loop_lags": [0.0002] * 98 + [0.0015] * 2}, "event-loop latency p99"),
    ({"cpu_percent": 91.0}, "client CPU 91%"),
    ({"merged_reads": 11}, "1.1% of chunk gaps merged"),
])
def test_each_branch_flags(change: dict[str, object], words: str) -> None:
    v = verdict(**{**HEALTHY, **change})  # type: ignore[arg-type]
    assert v["client_saturated"] is True
    assert words in v["saturation_reason"], v["saturation_reason"]
    assert ";" not in v["saturation_reason"]  # only the branch that tripped


def test_thresholds_follow_the_stated_precision() -> None:
    assert selfcheck.LOOP_LAG_P99_MAX_S == selfcheck.PRECISION_S == 0.001
    # precision + 1 ms timer resolution + 3 ms for the OS scheduling the thread
    assert selfcheck.DISPATCH_LAG_P99_MAX_S == pytest.approx(0.005)
    # just under each threshold: not flagged
    v = verdict([0.0049] * 100, [0.0049] * 100, [0.00099] * 100, 89.9, 10, 1000)
    assert v["client_saturated"] is False, v["saturation_reason"]


def test_cpu_is_taken_over_the_steady_window() -> None:
    mon = LoopLagMonitor()
    # (wall, thread cpu): idle ramp 0-1 s, busy 1-2 s (95 %), idle drain 2-4 s
    mon.cpu_samples = [(0.0, 0.0), (1.0, 0.05), (1.5, 0.525), (2.0, 1.0), (3.0, 1.02),
                       (4.0, 1.04)]
    assert mon.cpu_percent(1.0, 2.0) == pytest.approx(95.0)
    assert mon.cpu_percent() == pytest.approx(26.0)  # the whole window would hide it
    assert mon.cpu_percent(1.0, 1.001) == pytest.approx(26.0)  # too short: whole window


def _events(n: int) -> list[bytes]:
    out = []
    for i in range(1, n + 1):
        meta = {"completion_tokens": i, "prompt_tokens": 1,
                "finish_reason": {"type": "length"} if i == n else None}
        out.append(b"data: " + json.dumps({"text": "t" * i, "meta_info": meta}).encode()
                   + b"\n\n")
    return out + [b"data: [DONE]\n\n"]


def _transport(pieces_of: list[bytes], gap_s: float, after_end_block_s: float = 0.0
               ) -> httpx.MockTransport:
    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for p in pieces_of:
                await asyncio.sleep(gap_s)
                yield p
            if after_end_block_s:
                time.sleep(after_end_block_s)  # the loop is stuck after the body ended

    return httpx.MockTransport(lambda r: httpx.Response(200, stream=Stream()))


def test_closed_loop_lag_counts_from_the_previous_request_end() -> None:
    spec = LoadSpec(url="http://t", prompts=PROMPTS, concurrency=1, num_requests=6)
    res = asyncio.run(run_load(spec, _transport(_events(3), 0.001, after_end_block_s=0.01)))
    assert all(r["status"] == "ok" for r in res.rows)
    lags = [r["sent_at"] - r["scheduled_at"] for r in res.rows]
    assert all(lag >= 0.009 for lag in lags[1:]), lags  # the stall after each end counts
    assert res.stats["client_saturated"] and "dispatch lag" in res.stats["saturation_reason"]


def test_merged_reads_are_counted_and_flagged() -> None:
    ev = _events(8)
    pieces = [ev[0], ev[1] + ev[2], ev[3], ev[4] + ev[5] + ev[6], ev[7], ev[8]]
    spec = LoadSpec(url="http://t", prompts=PROMPTS, concurrency=1, num_requests=3)
    res = asyncio.run(run_load(spec, _transport(pieces, 0.002)))
    for r in res.rows:
        assert r["merged_reads"] == 3
        assert r["chunk_gap_s"].count(0.0) == 3  # the merged events share one stamp
    assert res.stats["merged_reads"] == 9 and res.stats["chunk_gaps"] == 21
    assert res.stats["merged_read_fraction"] == pytest.approx(9 / 21)
    assert "merged into one read" in res.stats["saturation_reason"]
