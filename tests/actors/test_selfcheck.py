"""The load generator's self-check (actors/loadgen/selfcheck.py): every branch of the verdict
driven into a flag, the lag definitions on real runs, CPU over the steady window."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import AsyncIterator

import httpx
import pytest

from actors.loadgen import selfcheck
from actors.loadgen.runner import new_event_loop_runner, run_load
from actors.loadgen.selfcheck import DISPATCH_LAG_P99_MAX_S, LoopLagMonitor, stalls, verdict
from actors.loadgen.spec import LoadResult, LoadSpec, Prompt
from actors.loadgen.timeline import Timeline
from tests.actors.bench_server import bench_server_module

PROMPTS = (Prompt("p", "hello", "d"),)
HEALTHY = {"dispatch_lags": [0.0001] * 100, "client_lags": [0.0001] * 100,
           "loop_lags": [0.0002] * 100, "cpu_percent": 40.0, "merged_reads": 0,
           "chunk_gaps": 1000}


def test_healthy_inputs_are_not_flagged() -> None:
    v = verdict(**HEALTHY)  # type: ignore[arg-type]
    assert v["client_saturated"] is False and v["saturation_reason"] is None


@pytest.mark.parametrize("change, words", [
    ({"client_lags": [0.0001] * 98 + [0.0055] * 2}, "dispatch stall: "),
    ({"loop_lags": [0.0002] * 98 + [0.0015] * 2}, "event-loop lag: latency p99 1.50 ms"),
    ({"cpu_percent": 91.0}, "CPU: event-loop thread at 91%"),
    ({"merged_reads": 11}, "merged reads: 1.1% of chunk gaps"),
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
    assert res.stats["client_saturated"]
    assert "dispatch stall" in res.stats["saturation_reason"]


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


def _burst(due: float, sends: list[float]) -> list[Timeline]:
    out = []
    for t in sends:
        tl = Timeline(due)
        tl.sent = t
        out.append(tl)
    return out


def test_a_burst_sent_back_to_back_has_no_stall_a_blocked_send_has() -> None:
    # 64 requests due at once, sent 150 µs apart: the last one's dispatch lag is 9.45 ms
    burst = _burst(1.0, [1.0 + 0.00015 * (k + 1) for k in range(64)])
    got = stalls(burst)
    assert got == pytest.approx([0.00015] * 64)
    lags = [tl.sent - tl.scheduled for tl in burst]
    assert max(lags) > DISPATCH_LAG_P99_MAX_S  # what the old check looked at
    v = verdict(lags, got, [0.0002] * 100, 30.0)
    assert v["client_saturated"] is False, v["saturation_reason"]
    assert v["dispatch_lag_p99_s"] > DISPATCH_LAG_P99_MAX_S  # still reported
    # one due request that waited 20 ms with nothing sent (a blocked loop) is a stall
    late = _burst(2.0, [2.02])
    assert stalls(burst + late)[-1] == pytest.approx(0.02)
    # a request that waited for a concurrency-cap slot counts from the slot
    capped = _burst(3.0, [3.021])
    capped[0].slot = 3.02
    assert stalls(capped) == pytest.approx([0.001])


def _run_on_burst_server(spec_kw: dict[str, object], hog_s: float = 0.0
                         ) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Run a closed loop against bench/fixed_schedule_server.py in burst mode in a process of
    its own (so nothing here can slow the server down); with ``hog_s``, a coroutine on the
    client's loop busy-waits ``hog_s`` at every turn it gets (a client starved of its loop).
    Returns the client's stats and the server's releases."""
    proc, base = bench_server_module().launch(None, "--no-record")
    try:
        spec = LoadSpec(url=base + "/sched/0/10/burst/64", prompts=PROMPTS, **spec_kw)

        async def go() -> LoadResult:
            async def hog() -> None:
                while True:
                    t = time.perf_counter()
                    while time.perf_counter() - t < hog_s:
                        pass
                    await asyncio.sleep(0)

            task = asyncio.get_running_loop().create_task(hog()) if hog_s else None
            try:
                return await run_load(spec)
            finally:
                if task is not None:
                    task.cancel()

        res = new_event_loop_runner()(go())
        with urllib.request.urlopen(base + "/bursts", timeout=10) as r:
            releases = json.loads(r.read())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert [r["status"] for r in res.rows] == ["ok"] * len(res.rows)
    return res.stats, releases


@pytest.mark.serial  # its loop-latency and merged-read checks read this machine's clock
def test_a_synchronized_burst_the_client_keeps_up_with_is_not_flagged() -> None:
    """64 streams the server ends in one step, three times over: each time the client's next
    64 requests fall due together and go out at once. Not flagged: no stall, and the burst's
    few ms of work are a small share of the loop's time (a wave is 60 steps of 10 ms, as a
    real cell's requests are long against the burst)."""
    stats, releases = _run_on_burst_server(dict(
        concurrency=64, num_requests=64 * 3, warmup_requests=64, max_new_tokens=60))
    assert [r["size"] for r in releases] == [64] * 4  # the warm-up, then three measured waves
    assert stats["client_saturated"] is False, stats["saturation_reason"]
    assert stats["client_dispatch_lag_p99_s"] < DISPATCH_LAG_P99_MAX_S


def test_a_client_starved_of_its_event_loop_is_flagged_and_says_why() -> None:
    stats, _ = _run_on_burst_server(dict(
        concurrency=8, num_requests=16, warmup_requests=8, max_new_tokens=4), hog_s=0.02)
    assert stats["client_saturated"] is True
    assert "event-loop lag: latency p99" in stats["saturation_reason"]
    assert stats["loop_lag_p99_s"] >= 0.015  # every probe waits behind a 20 ms busy turn
