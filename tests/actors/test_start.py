"""Start of the measured window: a start time already past re-anchors (no backlog fired at
once), and the clients of a cell start together after all have warmed up (LoadGenActor's
prepare/run barrier through Ray, as grid/execute/controller.py drives it)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from actors.loadgen.runner import LoadRun
from actors.loadgen.spec import LoadSpec, Prompt
from tests.actors.bench_server import bench_server_module
from tests.actors.test_runner import PROMPTS, Recorder


def test_past_start_time_reanchors_instead_of_firing_a_backlog() -> None:
    spec = LoadSpec(url="http://t", prompts=PROMPTS, rate=100.0, arrival="constant",
                    num_requests=10)
    rec = Recorder(gap_s=0.001, counts=[1, 2])

    async def go() -> Any:
        run = LoadRun(spec, rec.transport())
        await run.prepare()
        try:
            return await run.measure(start_at=time.time() - 1.0)
        finally:
            await run.aclose()

    res = asyncio.run(go())
    sends = sorted(r["sent_at"] for r in res.rows)
    assert res.stats["start_late_s"] >= 1.0
    assert sends[-1] - sends[0] == pytest.approx(0.09, abs=0.02)  # 10 arrivals at 100/s
    gaps = sorted(b - a for a, b in zip(sends, sends[1:], strict=False))
    assert gaps[len(gaps) // 2] == pytest.approx(0.01, abs=0.003)  # paced, not a burst
    assert res.stats["dispatch_lag_p50_s"] < 0.005  # (a backlog: ~1 s)
    assert res.stats["offered_rate_req_s"] == 100.0
    assert res.stats["achieved_rate_req_s"] == pytest.approx(100.0, rel=0.15)


def test_future_start_time_is_waited_for() -> None:
    spec = LoadSpec(url="http://t", prompts=PROMPTS, concurrency=2, num_requests=4)

    async def go() -> tuple[float, Any]:
        run = LoadRun(spec, Recorder(gap_s=0.001).transport())
        await run.prepare()
        start = time.time() + 0.15
        try:
            return start, await run.measure(start_at=start)
        finally:
            await run.aclose()

    start, res = asyncio.run(go())
    assert res.stats["start_late_s"] == 0.0
    assert res.stats["window_start"] == pytest.approx(start, abs=0.002)
    assert min(r["sent_at"] for r in res.rows) >= start


@pytest.mark.usefixtures("ray_session")
def test_clients_start_together_after_slow_and_fast_warmups() -> None:
    import ray

    from actors.loadgen.actor import START_MARGIN_S, LoadGenActor

    mod = bench_server_module()
    loop = asyncio.new_event_loop()
    server, port, _ = loop.run_until_complete(mod.start_server(cfg=mod.ServerConfig()))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{port}"
        prompts = (Prompt("a", "warm", "d"),)
        # client 0 warms up slowly (4 sequential requests with a 150 ms TTFT), client 1 fast
        specs = [LoadSpec(url=base + "/sched/150/1", prompts=prompts, concurrency=2,
                          num_requests=4, warmup_requests=8, max_new_tokens=4, num_clients=2,
                          client_index=0),
                 LoadSpec(url=base + "/sched/1/1", prompts=prompts, concurrency=2,
                          num_requests=4, warmup_requests=8, max_new_tokens=4, num_clients=2,
                          client_index=1)]
        actors = [LoadGenActor.options(num_cpus=0).remote() for _ in specs]  # type: ignore[attr-defined]
        ready = ray.get([a.prepare.remote(s) for a, s in zip(actors, specs, strict=True)])
        start_at = time.time() + START_MARGIN_S
        results = ray.get([a.run.remote(start_at) for a in actors])
        for a in actors:
            ray.kill(a)
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
    slow_ready = ready[0]["ready_at"]
    assert ready[0]["warmup_requests"] == 4 and ready[1]["warmup_requests"] == 4
    assert slow_ready - ready[1]["ready_at"] > 0.1  # the warm-ups really differed
    for res in results:
        assert [r["status"] for r in res.rows] == ["ok"] * 2
        assert res.stats["start_late_s"] == 0.0
        assert res.stats["window_start"] == pytest.approx(start_at, abs=0.005)
        # nobody's measured request left before everyone's warm-up had ended
        assert min(r["sent_at"] for r in res.rows) >= max(slow_ready, start_at)
