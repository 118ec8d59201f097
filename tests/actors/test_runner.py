"""run_load (actors/loadgen/runner.py): load shapes, splitting, errors, self-check; against
httpx.MockTransport and against the real bench/fixed_schedule_server.py over sockets."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from actors.loadgen import schedule
from actors.loadgen.runner import run_load, run_load_sync
from actors.loadgen.spec import ROW_KEYS, LoadResult, LoadSpec, Prompt
from specgrid_metrics.requests import summarize_cell
from tests.actors.bench_server import bench_server_module

PROMPTS = tuple(Prompt(f"p{i}", f"prompt number {i}", ["coding", "agentic"][i % 2])
                for i in range(10))


def native(counts: list[int]) -> list[bytes]:
    out = []
    for j, c in enumerate(counts):
        final = j == len(counts) - 1
        meta = {"completion_tokens": c, "prompt_tokens": 3,
                "finish_reason": {"type": "length", "length": c} if final else None}
        if final:
            meta["spec_verify_ct"] = len(counts)
        out.append(b"data: " + json.dumps({"text": "t" * c, "meta_info": meta}).encode()
                   + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


class Recorder:
    """A MockTransport whose streams pace chunks and record concurrency and prompts."""

    def __init__(self, gap_s: float = 0.002, counts: list[int] | None = None,
                 block_s: float = 0.0) -> None:
        self.gap_s = gap_s
        self.counts = counts or [1, 2, 4]
        self.block_s = block_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.texts: list[str] = []
        self.times: list[float] = []

    def transport(self) -> httpx.MockTransport:
        rec = self

        class Stream(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                rec.in_flight += 1
                rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
                try:
                    for piece in native(rec.counts):
                        await asyncio.sleep(rec.gap_s)
                        if rec.block_s:
                            time.sleep(rec.block_s)  # starve the event loop
                        yield piece
                finally:
                    rec.in_flight -= 1

        def handler(request: httpx.Request) -> httpx.Response:
            rec.texts.append(json.loads(request.content)["text"])
            rec.times.append(time.perf_counter())
            return httpx.Response(200, stream=Stream())

        return httpx.MockTransport(handler)


def run(spec: LoadSpec, rec: Recorder) -> LoadResult:
    return asyncio.run(run_load(spec, transport=rec.transport()))


def mk(**kw: Any) -> LoadSpec:
    return LoadSpec(**{"url": "http://test", "prompts": PROMPTS, **kw})


# --- closed loop
def test_closed_loop_rows_warmup_and_concurrency() -> None:
    rec = Recorder()
    res = run(mk(concurrency=3, num_requests=12, warmup_requests=2, seed=5), rec)
    assert len(res.rows) == 12
    assert all(tuple(r) == ROW_KEYS for r in res.rows)
    assert [r["request_id"] for r in res.rows] == [f"c0-{n}" for n in range(12)]
    assert all(r["status"] == "ok" and r["output_tokens"] == 4 for r in res.rows)
    assert rec.max_in_flight == 3
    assert len(rec.texts) == 14  # warmup sent, excluded from rows
    order = schedule.prompt_order(len(PROMPTS), 5)
    expected = [PROMPTS[order[(2 + n) % 10]].prompt_id for n in range(12)]
    assert [r["prompt_id"] for r in res.rows] == expected
    assert res.stats["measured_requests"] == 12 and res.stats["warmup_requests"] == 2
    st = res.stats
    assert st["window_start"] <= min(r["sent_at"] for r in res.rows)
    assert st["window_end"] >= max(r["sent_at"] + r["e2e_s"] for r in res.rows) - 1e-6
    for key in ("dispatch_lag_p50_s", "dispatch_lag_p99_s", "loop_lag_p99_s",
                "client_cpu_percent", "client_saturated", "saturation_reason"):
        assert key in st
    for r in res.rows:
        assert r["sent_at"] >= r["scheduled_at"]
        assert r["accept_length"] == pytest.approx(4 / 3) and r["spec_verify_ct"] == 3
        assert r["ttft_s"] > 0 and r["e2e_s"] >= r["ttft_s"] and len(r["itl_s"]) == 3
    cell = summarize_cell(res.rows, st["window_end"] - st["window_start"], st)
    assert cell["requests_ok"] == 12 and cell["accept_length"] == pytest.approx(4 / 3)


def test_progress_counts_finished_requests_while_the_window_runs() -> None:
    from actors.loadgen.runner import LoadRun

    rec = Recorder(gap_s=0.01)  # 4 chunks: ~40 ms a request, 2 at a time

    async def go() -> tuple[list[dict[str, int]], LoadResult, dict[str, int]]:
        run = LoadRun(mk(concurrency=2, num_requests=20, warmup_requests=0),
                      transport=rec.transport())
        await run.prepare()
        task = asyncio.create_task(run.measure())
        seen = []
        while not task.done():
            await asyncio.sleep(0.05)
            seen.append(run.tally.progress())
        result = await task
        final = run.tally.progress()
        await run.aclose()
        return seen, result, final

    seen, result, final = asyncio.run(go())
    done = [s["done"] for s in seen]
    assert done == sorted(done) and 0 < done[0] < 20  # counted while running, never backwards
    activity = [s["activity"] for s in seen]
    assert activity == sorted(activity)
    # each request: 3 content events (1, 2, 4 tokens so far) and its completion
    assert final == {"done": 20, "tokens": 20 * 4, "errors": 0, "activity": 20 * (3 + 1)}
    assert final["tokens"] == sum(r["output_tokens"] for r in result.rows)


def test_progress_counts_the_chunks_of_requests_in_flight_and_of_the_warmup() -> None:
    from actors.loadgen.runner import LoadRun

    # one event per 50 ms, 10 events (1..10 tokens so far) and [DONE]: ~0.55 s a request
    rec = Recorder(gap_s=0.05, counts=list(range(1, 11)))

    async def go() -> dict[str, dict[str, int]]:
        run = LoadRun(mk(concurrency=1, num_requests=1, warmup_requests=1),
                      transport=rec.transport())
        seen = {}
        task = asyncio.create_task(run.prepare())
        await asyncio.sleep(0.3)  # the warm-up request is streaming
        seen["warming"] = run.tally.progress()
        await task
        seen["warmed"] = run.tally.progress()
        task = asyncio.create_task(run.measure())
        await asyncio.sleep(0.3)  # the measured request is streaming
        seen["streaming"] = run.tally.progress()
        await task
        seen["final"] = run.tally.progress()
        await run.aclose()
        return seen

    seen = asyncio.run(go())
    # a warm-up request counts as activity, never in the measured counts
    assert seen["warming"]["done"] == 0 and 0 < seen["warming"]["activity"] < 10
    assert seen["warmed"] == {"done": 0, "tokens": 0, "errors": 0, "activity": 10 + 1}
    # chunks of a request still in flight count before it completes
    assert seen["streaming"]["done"] == 0 and 11 < seen["streaming"]["activity"] < 11 + 10
    assert seen["final"] == {"done": 1, "tokens": 10, "errors": 0, "activity": 2 * (10 + 1)}


def test_failed_requests_are_no_activity() -> None:
    from actors.loadgen.runner import LoadRun

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, content=b"no")

    async def go() -> dict[str, int]:
        run = LoadRun(mk(concurrency=2, num_requests=4, warmup_requests=0),
                      transport=httpx.MockTransport(refuse))
        await run.measure()
        await run.aclose()
        return run.tally.progress()

    # four requests ended, each with an error and no chunk: the server made no progress
    assert asyncio.run(go()) == {"done": 4, "tokens": 0, "errors": 4, "activity": 0}


def test_default_closed_loop_is_one_at_a_time_and_duration_bounds() -> None:
    rec = Recorder(gap_s=0.005)
    res = run(mk(num_requests=None, duration_s=0.3), rec)
    assert rec.max_in_flight == 1
    n = len(res.rows)
    assert 3 <= n <= 20  # ~20 ms per request over 0.3 s
    assert max(r["scheduled_at"] for r in res.rows) - res.stats["window_start"] < 0.3
    # both bounds: whichever ends first
    res = run(mk(num_requests=2, duration_s=10.0), Recorder())
    assert len(res.rows) == 2


# --- open loop
def test_open_loop_follows_absolute_schedule() -> None:
    rec = Recorder(gap_s=0.001)
    res = run(mk(rate=100.0, arrival="constant", num_requests=20), rec)
    start = res.stats["window_start"]
    offs = [r["scheduled_at"] - start for r in res.rows]
    assert offs == pytest.approx([i / 100.0 for i in range(20)], abs=1e-6)  # every 10 ms
    lags = [r["sent_at"] - r["scheduled_at"] for r in res.rows]
    assert min(lags) >= 0 and max(lags) < 0.02
    assert res.stats["dispatch_lag_p99_s"] < 0.02
    # Open loop does not wait for earlier requests: ~40 ms requests arriving every 10 ms
    # overlap about 4 deep (a closed loop of one would stay at 1).
    slow = Recorder(gap_s=0.01)
    run(mk(rate=100.0, arrival="constant", num_requests=20), slow)
    assert slow.max_in_flight >= 3


def test_open_loop_cap_and_poisson() -> None:
    rec = Recorder(gap_s=0.01)  # each request ~40 ms
    res = run(mk(rate=400.0, concurrency=2, num_requests=10, seed=2), rec)
    assert rec.max_in_flight == 2
    assert len(res.rows) == 10 and all(r["status"] == "ok" for r in res.rows)
    # capped arrivals wait for a slot: that wait is dispatch lag, but not client saturation
    assert res.stats["dispatch_lag_p99_s"] > 0.02
    assert res.stats["client_dispatch_lag_p99_s"] < 0.01
    assert "dispatch" not in (res.stats["saturation_reason"] or "")


def test_open_loop_duration_bound() -> None:
    res = run(mk(rate=50.0, arrival="constant", num_requests=None, duration_s=0.2), Recorder())
    assert len(res.rows) == 10  # offsets 0, 0.02, ..., 0.18


# --- split over N clients
@pytest.mark.parametrize("kw", [
    {"concurrency": 5, "num_requests": 23, "warmup_requests": 3},
    {"rate": 500.0, "arrival": "gamma", "burstiness": 0.5, "num_requests": 17,
     "concurrency": 4},
])
def test_split_over_clients_equals_one_client(kw: dict[str, Any]) -> None:
    single = run(mk(**kw), Recorder(gap_s=0.0005))
    parts = [run(mk(**kw, num_clients=3, client_index=i), Recorder(gap_s=0.0005))
             for i in range(3)]
    rows = [r for p in parts for r in p.rows]
    assert len(rows) == len(single.rows)
    ids = [r["request_id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert all(r["request_id"].startswith(f"c{i}-") for i, p in enumerate(parts) for r in p.rows)
    by_n = {int(r["request_id"].split("-")[1]): r["prompt_id"] for r in rows}
    assert [by_n[n] for n in range(len(rows))] == [r["prompt_id"] for r in single.rows]
    assert sum(p.stats["warmup_requests"] for p in parts) == single.stats["warmup_requests"]


def test_split_closed_loop_follows_concurrency_shares() -> None:
    recs = [Recorder(gap_s=0.001) for _ in range(3)]
    parts = [run(mk(concurrency=7, num_requests=70, num_clients=3, client_index=i), recs[i])
             for i in range(3)]
    assert [r.max_in_flight for r in recs] == [3, 2, 2]
    assert [len(p.rows) for p in parts] == [30, 20, 20]


# --- failures
def test_errors_become_rows() -> None:
    calls = {"n": 0}

    class Hang(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield native([1])[0]
            await asyncio.sleep(30)
            yield b""

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        k = calls["n"] % 4
        if k == 1:
            raise httpx.ConnectError("refused", request=request)
        if k == 2:
            return httpx.Response(500, content=b"internal")
        if k == 3:
            return httpx.Response(200, stream=Hang())
        return httpx.Response(200, content=b"".join(native([2, 3])))

    t0 = time.perf_counter()
    res = asyncio.run(run_load(mk(concurrency=4, num_requests=8, request_timeout_s=0.3),
                               transport=httpx.MockTransport(handler)))
    assert time.perf_counter() - t0 < 5
    errors = sorted(r["error"].split(":")[0] for r in res.rows if r["status"] == "error")
    assert errors == ["ConnectError"] * 2 + ["HTTP 500"] * 2 + ["timeout"] * 2
    assert sum(r["status"] == "ok" for r in res.rows) == 2
    hung = [r for r in res.rows if (r["error"] or "").startswith("timeout")]
    assert all(r["ttft_s"] is not None and r["e2e_s"] >= 0.3 for r in hung)


def test_starved_client_is_flagged() -> None:
    rec = Recorder(gap_s=0.0, counts=[1, 2, 3, 4, 5, 6], block_s=0.015)
    res = run(mk(concurrency=2, num_requests=6), rec)
    assert res.stats["client_saturated"] is True
    assert "event-loop lag" in res.stats["saturation_reason"]
    assert res.stats["loop_lag_p99_s"] > 0.005


def test_healthy_client_is_not_flagged() -> None:
    res = run(mk(concurrency=2, num_requests=10), Recorder(gap_s=0.01))
    assert res.stats["client_saturated"] is False, res.stats["saturation_reason"]
    assert res.stats["saturation_reason"] is None


# --- real sockets: bench/fixed_schedule_server.py
async def _with_server(fn: Any, **cfg: Any) -> Any:
    mod = bench_server_module()
    server, port, config = await mod.start_server(cfg=mod.ServerConfig(**cfg))
    try:
        return await fn(f"http://127.0.0.1:{port}", config)
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("transport", ["raw", "aiohttp", "httpx"])
@pytest.mark.parametrize("endpoint", ["generate", "chat"])
def test_real_server_timing(transport: str, endpoint: str) -> None:
    async def go(url: str, cfg: Any) -> LoadResult:
        return await run_load(LoadSpec(
            url=url + "/sched/20/5", prompts=PROMPTS, concurrency=4, num_requests=8,
            warmup_requests=4, max_new_tokens=12, transport=transport, endpoint=endpoint))

    res = asyncio.run(_with_server(go))
    assert [r["status"] for r in res.rows] == ["ok"] * 8, [r["error"] for r in res.rows]
    for r in res.rows:
        assert r["output_tokens"] == 12
        # server and client share one loop here: sanity bounds, not precision (see bench/)
        assert 0.019 <= r["ttft_s"] < 0.100
        # chunks every 5 ms carrying 1-3 tokens: per-token gaps 1.67..5 ms (+ jitter)
        assert all(0.0 <= g < 0.050 for g in r["itl_s"])
        assert sum(r["itl_s"]) == pytest.approx(r["e2e_s"] - r["ttft_s"], abs=0.02)
        assert r["e2e_s"] > r["ttft_s"]
        # chunk series: arrival offsets after sent_at, tokens, one gap per chunk
        assert sum(r["chunk_tokens"]) == 12 and len(r["chunk_offset_us"]) == len(r["chunk_tokens"])
        assert r["chunk_offset_us"][0] == pytest.approx(r["ttft_s"] * 1e6, abs=1)
        assert r["chunk_offset_us"] == sorted(r["chunk_offset_us"])
        assert len(r["chunk_gap_s"]) == len(r["chunk_tokens"]) - 1
        assert sum(r["chunk_gap_s"]) == pytest.approx(sum(r["itl_s"]), abs=1e-9)
    assert res.stats["transport"] == transport
    if endpoint == "generate":
        assert all(r["spec_verify_ct"] and r["accept_length"] >= 1.0 for r in res.rows)
        for r in res.rows:
            n, v = r["output_tokens"], r["spec_verify_ct"]
            assert r["accept_length"] == n / v and r["accept_length_decode"] == (n - 1) / v


def test_streams_have_connections_before_the_window() -> None:
    """A warm-up of fewer requests than streams: the pool is topped up to the concurrency
    before the window, so no measured request (the first wave included) opens a connection."""
    from time import perf_counter

    from actors.loadgen.transport import StampingTransport

    connects: list[float] = []

    class Recording(StampingTransport):
        async def _connect(self, key: Any, timeout: float | None) -> Any:
            connects.append(perf_counter())
            return await super()._connect(key, timeout)

    async def go(url: str, cfg: Any) -> LoadResult:
        return await run_load(LoadSpec(
            url=url + "/sched/5/2", prompts=PROMPTS, concurrency=6, num_requests=12,
            warmup_requests=1, max_new_tokens=4), transport=Recording())

    res = asyncio.run(_with_server(go))
    assert [r["status"] for r in res.rows] == ["ok"] * 12
    assert res.stats["preconnected"] == 5 and len(connects) == 6
    window_start = res.stats["window_start"] - res.stats["clock_offset_s"]
    assert max(connects) < window_start


def test_real_server_faults_and_keepalive() -> None:
    async def go(url: str, cfg: Any) -> dict[str, LoadResult]:
        out = {}
        for fault in ("500", "broken", "close", "abort", "hang", "none"):
            path = "" if fault == "none" else f"/fault/{fault}"
            out[fault] = await run_load(LoadSpec(
                url=url + "/sched/1/1" + path, prompts=PROMPTS, concurrency=2, num_requests=4,
                max_new_tokens=8, request_timeout_s=0.5))
        out["refused"] = await run_load(LoadSpec(
            url="http://127.0.0.1:1", prompts=PROMPTS, num_requests=1, connect_timeout_s=1.0))
        return out

    res = asyncio.run(_with_server(go))
    expect = {"500": "HTTP 500", "broken": "bad event", "close": "RemoteProtocolError",
              "abort": "aborted", "hang": "timeout", "refused": "ConnectError"}
    for fault, word in expect.items():
        rows = res[fault].rows
        assert rows and all(r["status"] == "error" for r in rows), fault
        assert all(word in r["error"] for r in rows), (fault, rows[0]["error"])
    assert all(r["status"] == "ok" for r in res["none"].rows)


def test_keepalive_reuses_connections() -> None:
    opened: list[int] = []

    async def go2(url: str, cfg: Any) -> None:
        from actors.loadgen import transport as tmod

        tr = tmod.StampingTransport()
        orig = tr._connect

        async def counting(key: Any, timeout: Any) -> Any:
            opened.append(1)
            return await orig(key, timeout)

        tr._connect = counting  # type: ignore[method-assign]
        res = await run_load(LoadSpec(url=url + "/sched/0/0", prompts=PROMPTS, concurrency=3,
                                      num_requests=30, max_new_tokens=4), transport=tr)
        assert all(r["status"] == "ok" for r in res.rows)

    asyncio.run(_with_server(go2))
    assert len(opened) == 3


def test_run_load_sync_on_uvloop() -> None:
    mod = bench_server_module()

    async def serve_and_run() -> LoadResult:
        server, port, _ = await mod.start_server()
        try:
            spec = LoadSpec(url=f"http://127.0.0.1:{port}/sched/2/1", prompts=PROMPTS,
                            concurrency=2, num_requests=4, max_new_tokens=5)
            return await asyncio.to_thread(run_load_sync, spec)
        finally:
            server.close()

    res = asyncio.run(serve_and_run())
    assert all(r["status"] == "ok" for r in res.rows)
    assert res.stats["event_loop"].startswith("uvloop")


def test_gc_is_paused_in_the_window_and_restored() -> None:
    import gc

    assert gc.isenabled()
    res = run(mk(concurrency=2, num_requests=4), Recorder())
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert res.stats["gc_paused"] is True and isinstance(res.stats["gc_collected"], int)
    res = run(mk(concurrency=2, num_requests=4, gc_freeze=False), Recorder())
    assert res.stats["gc_paused"] is False and res.stats["gc_collected"] is None
