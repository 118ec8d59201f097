"""The load generator's early stop (actors/loadgen/stopping.py) through run_load, against
httpx.MockTransport servers whose timing is constructed: a precision target reached before the
count, never reached (the cap), the time bound, and an open loop above a server's capacity
(flagged at a check long after the first completions, and at every check from the first on)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from time import perf_counter
from typing import Any

import httpx
import numpy as np
import pytest

from actors.loadgen.runner import run_load
from actors.loadgen.spec import LoadResult, LoadSpec, Prompt
from actors.loadgen.stopping import Stop, Watch, arrays
from actors.loadgen.timeline import Timeline
from specgrid_metrics import saturation
from specgrid_metrics.precision import parse_targets

PROMPTS = tuple(Prompt(f"p{i}", f"prompt {i}", "coding") for i in range(4))
CHUNKS = 5  # one token per chunk


def server(duration_of: Callable[[int], float], capacity: int | None = None
           ) -> httpx.MockTransport:
    """A native-stream server: request n streams CHUNKS one-token events over duration_of(n)
    seconds; with `capacity`, at most that many stream at once (the rest wait, FIFO)."""
    counter = itertools.count()
    slots = asyncio.Semaphore(capacity) if capacity else None

    class Stream(httpx.AsyncByteStream):
        def __init__(self, n: int) -> None:
            self.n = n

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if slots is not None:
                await slots.acquire()
            try:
                gap = duration_of(self.n) / CHUNKS
                for k in range(1, CHUNKS + 1):
                    await asyncio.sleep(gap)
                    meta = {"completion_tokens": k, "prompt_tokens": 3,
                            "finish_reason": {"type": "length"} if k == CHUNKS else None}
                    yield b"data: " + json.dumps({"text": "t" * k, "meta_info": meta}).encode() \
                        + b"\n\n"
                yield b"data: [DONE]\n\n"
            finally:
                if slots is not None:
                    slots.release()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Stream(next(counter)))

    return httpx.MockTransport(handler)


def run(transport: httpx.MockTransport, **kw: Any) -> LoadResult:
    spec = LoadSpec(url="http://mock", prompts=PROMPTS, max_new_tokens=CHUNKS,
                    check_interval_s=0.05, **kw)
    return asyncio.run(run_load(spec, transport=transport))


TIGHT = parse_targets({"metric": "output_tok_s", "half_width": 0.05})


def test_a_target_stops_the_closed_loop_before_its_count() -> None:
    # Identical 50 ms requests on 2 streams: no spread between requests, so the target holds
    # as soon as 10 requests lived inside the window (from the 2nd send to the last): 12 at
    # the earliest, more as the checks lag (every 50 ms here, slower when a check's CPU time
    # is long: stopping.CHECK_DUTY), far fewer than the cap of 200 either way.
    result = run(server(lambda n: 0.05), concurrency=2, num_requests=200, targets=TIGHT,
                 min_requests=4)
    stats = result.stats
    assert stats["stop_reason"] == "target", stats["stop_detail"]
    assert 12 <= len(result.rows) <= 150, (len(result.rows), stats["precision_checks"])
    assert stats["stop_detail"].startswith("output_tok_s ±")
    assert stats["precision_checks"] >= 1 and stats["check_cpu_s"] > 0
    assert all(r["status"] == "ok" for r in result.rows)  # every request issued drained


def test_a_target_never_reached_stops_at_the_cap() -> None:
    # Requests of 10 ms and 100 ms alternate (one 10x the other): the normal approximation
    # puts ±5 % beyond 500 requests; the cap is 30.
    result = run(server(lambda n: 0.01 if n % 2 else 0.1), concurrency=1, num_requests=30,
                 targets=TIGHT, min_requests=4)
    assert result.stats["stop_reason"] == "cap"
    assert len(result.rows) == 30


def test_the_time_bound_and_the_count() -> None:
    slow = run(server(lambda n: 0.01 if n % 2 else 0.1), concurrency=1, num_requests=None,
               duration_s=0.6, targets=TIGHT)
    assert slow.stats["stop_reason"] == "duration"
    plain = run(server(lambda n: 0.02), concurrency=2, num_requests=6)
    assert plain.stats["stop_reason"] == "count" and len(plain.rows) == 6
    assert plain.stats["precision_checks"] == 0  # no target, no saturation stop: no checks


def catching_up(slots_n: int = 4, service_s: float = 0.2, idle_s: float = 1.0
                ) -> httpx.MockTransport:
    """`slots_n` slots of `service_s` (FIFO) while requests keep coming; once none came for
    `idle_s` (after the first ten), what waits is answered at once: the load's drain takes
    no time, whatever the backlog."""
    slots = asyncio.Semaphore(slots_n)
    state = {"last": perf_counter(), "requests": 0, "open": False}

    async def open_when_idle() -> None:
        while perf_counter() - state["last"] < idle_s:
            await asyncio.sleep(0.1)
        state["open"] = True
        for _ in range(100_000):  # every waiter, now and later, gets a slot
            slots.release()

    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            await slots.acquire()
            try:
                for k in range(1, CHUNKS + 1):
                    await asyncio.sleep(0.0 if state["open"] else service_s / CHUNKS)
                    meta = {"completion_tokens": k, "prompt_tokens": 3,
                            "finish_reason": {"type": "length"} if k == CHUNKS else None}
                    yield b"data: " + json.dumps({"text": "t" * k, "meta_info": meta}).encode() \
                        + b"\n\n"
                yield b"data: [DONE]\n\n"
            finally:
                slots.release()

    def handler(request: httpx.Request) -> httpx.Response:
        state["last"] = perf_counter()
        state["requests"] += 1
        if state["requests"] == 10:
            asyncio.get_running_loop().create_task(open_when_idle())
        return httpx.Response(200, stream=Stream())

    return httpx.MockTransport(handler)


@pytest.mark.slow
def test_an_open_loop_above_capacity_is_flagged_at_every_check_from_its_first() -> None:
    # 40 arrivals/s on a server of 4 slots x 0.2 s (20/s): the backlog grows 20 a second.
    # Checks only after the first 30 s, past the span after the first completions where the
    # rule that compared the rise with the backlog's level still saw it (at 2x capacity, up
    # to 25 s): the load generator's own first check at 36 s stops the load, over-saturated,
    # and the checks replayed over the run's own timestamps every 0.5 s from 30 s to its last
    # send flag it too. By hand at any of them: the last 10 s, 400 arrivals and 200 ends, a
    # growth of 200 against 3 x sqrt(600) = 73 and the floor of 40.
    spec = LoadSpec(url="http://mock", prompts=PROMPTS, max_new_tokens=CHUNKS, rate=40.0,
                    arrival="constant", num_requests=1600, stop_over_saturated=True,
                    check_interval_s=36.0)
    result = asyncio.run(run_load(spec, transport=catching_up()))
    stats = result.stats
    assert stats["stop_reason"] == "over_saturated", stats["stop_detail"]
    assert stats["precision_checks"] == 1
    evidence = json.loads(stats["stop_evidence"])
    t0 = stats["window_start"]
    assert evidence["end"] - t0 >= 36.0 and evidence["window_s"] == pytest.approx(10.0)
    assert evidence["slope"] == pytest.approx(20, rel=0.25)
    rows = result.rows
    sched = np.array([r["scheduled_at"] for r in rows]) - t0
    sent = np.array([r["sent_at"] for r in rows]) - t0
    end = sent + np.array([r["e2e_s"] for r in rows], dtype=float)
    tokens = np.full(len(rows), float(CHUNKS))
    checks = np.arange(30.0, sent.max(), 0.5)
    assert checks.size >= 12
    missed = []
    for now in checks:
        seen = sched <= now
        sat = saturation.open_loop(sched[seen], np.where(end[seen] <= now, end[seen], np.nan),
                                   tokens[seen], now)
        if not sat.over_saturated:
            missed.append((now, sat.reason))
    assert missed == []
    # the end-of-window check, as the watch makes it when a load ends by its count: at the
    # last send, with every end known
    assert saturation.open_loop(sched, end, tokens, float(sent.max())).over_saturated


@pytest.mark.slow
def test_an_open_loop_within_capacity_runs_to_its_count() -> None:
    result = run(server(lambda n: 0.2, capacity=4), rate=10.0, arrival="constant",
                 num_requests=80, stop_over_saturated=True)
    assert result.stats["stop_reason"] == "count" and len(result.rows) == 80


def test_two_clients_each_stop_at_their_share() -> None:
    # Each of two clients holds half the streams and checks against ±5 % x sqrt(2).
    base = LoadSpec(url="http://mock", prompts=PROMPTS, max_new_tokens=CHUNKS,
                    check_interval_s=0.05, concurrency=4, num_requests=400, targets=TIGHT,
                    min_requests=8, num_clients=2)
    async def both() -> list[LoadResult]:
        return await asyncio.gather(*(run_load(replace(base, client_index=i),
                                               transport=server(lambda n: 0.05))
                                      for i in range(2)))

    results = asyncio.run(both())
    assert [r.stats["stop_reason"] for r in results] == ["target", "target"]
    assert sum(len(r.rows) for r in results) < 100


def test_a_check_that_breaks_ends_the_checks_not_the_cell(monkeypatch) -> None:
    from specgrid_metrics import precision

    def broken(*args: Any, **kw: Any) -> Any:
        raise FloatingPointError("constructed")

    monkeypatch.setattr(precision, "check", broken)
    result = run(server(lambda n: 0.02), concurrency=2, num_requests=40, targets=TIGHT,
                 min_requests=4)
    assert result.stats["stop_reason"] == "cap" and len(result.rows) == 40
    assert result.stats["check_error"] == "FloatingPointError: constructed"


def capped_timelines(now: float, cap: int = 4) -> tuple[list, list[float]]:
    """10 arrivals/s for 120 s on a server of one 0.2 s slot (5/s), the client holding at most
    `cap` in flight: what the client has dispatched by `now` (arrival i takes its slot when
    the request `cap` before it ended), and the whole schedule."""
    scheduled = [0.1 * i for i in range(1200)]
    results, ends = [], []
    slot = free = 0.0
    for i, at in enumerate(scheduled):
        slot = max(at, slot, ends[i - cap] if i >= cap else 0.0)
        ends.append(max(slot, free) + 0.2)
        free = ends[-1]
        if slot > now:
            break
        tl = Timeline(at)
        tl.slot = tl.sent = slot
        if ends[-1] <= now:
            tl.end, tl.output_tokens = ends[-1], CHUNKS
        results.append((i, 0, tl))
    return results, scheduled


@pytest.mark.parametrize("now", [30.0, 60.0, 119.0])
def test_a_capped_open_loop_counts_the_arrivals_waiting_for_a_slot(now: float) -> None:
    # Twice the server's capacity behind a cap of 4 in flight: the client dispatches at the
    # server's 5/s, so its timelines alone hold a backlog of 4 (and the arrivals they record
    # lag further and further behind the schedule): never flagged. With the schedule the
    # watch counts the arrivals due and not dispatched: a backlog of 5 t, over the last 10 s
    # 100 arrivals and 50 ends, a growth of 50 against 3 x sqrt(150) = 37.
    results, scheduled = capped_timelines(now)
    req, sched, _ = arrays(results)
    blind = Watch((), 0, closed_loop=False, concurrency=4, share=1.0,
                  stop_over_saturated=True, interval_s=1.0, stop=Stop())
    assert not blind.saturated(req, sched, now).over_saturated
    seeing = replace(blind, schedule=iter(scheduled))
    sat = seeing.saturated(req, sched, now)
    assert sat.over_saturated and sat.slope == pytest.approx(5.0, rel=0.05), sat.reason
    assert sat.rise == pytest.approx(50, abs=2)
