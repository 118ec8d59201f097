"""The conversation runner against real local HTTP servers: bench/fixed_schedule_server.py
(exact schedule, records every prompt it received) and the simulator (engines/sim, started as
its own process)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.loadgen.conversation import ConversationRun, run_conversations
from actors.loadgen.conversation_plan import ROW_KEYS, ConversationLoadSpec
from actors.loadgen.selfcheck import DISPATCH_LAG_P99_MAX_S
from actors.loadgen.spec import LoadResult
from tests.actors.bench_server import bench_server_module
from tests.engines.sim.conftest import SimProcess, start_sim
from workloads.conversations import Conversation, Turn, load_conversations
from workloads.conversations_data import AGENTIC

GEN = "<|im_start|>assistant\n"


def shipped(n: int, min_turns: int = 5) -> tuple[Conversation, ...]:
    """The first n shipped conversations with at least ``min_turns`` rounds."""
    convs, _ = load_conversations(AGENTIC)
    return tuple(c for c in convs if len(c.turns) >= min_turns)[:n]


def run_fixed(spec_kw: dict[str, Any], **server_kw: Any,
              ) -> tuple[LoadResult, dict[str, Any]]:
    """Run against an in-process fixed-schedule server; returns (result, its /stamps)."""
    mod = bench_server_module()

    async def go() -> tuple[LoadResult, dict[str, Any]]:
        server, port, _ = await mod.start_server(cfg=mod.ServerConfig(**server_kw))
        try:
            url = f"http://127.0.0.1:{port}"
            res = await run_conversations(ConversationLoadSpec(url=url, **spec_kw))
            async with httpx.AsyncClient() as c:
                stamps = (await c.get(url + "/stamps")).json()
            return res, stamps
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(go())


def chatml(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def test_rounds_replay_in_order_and_history_grows_by_each_delta() -> None:
    convs = shipped(3)
    res, stamps = run_fixed(dict(conversations=convs, concurrency=2, max_turns=5,
                                 max_new_tokens=8), ttft_ms=2, chunk_ms=1)
    rows = res.rows
    assert all(tuple(r) == ROW_KEYS for r in rows)
    assert [(r["conversation_id"], r["turn_index"]) for r in rows] == [
        (c.conversation_id, k) for c in convs for k in range(5)]
    assert all(r["status"] == "ok" and r["reply_source"] == "recorded" for r in rows)
    by_conv: dict[str, list[str]] = {}
    recv = {p: s["recv"] for p, s in stamps.items()}
    for c in convs:
        # the prompts the server received for this conversation, in arrival order
        mine = sorted((p for p in stamps if c.turns[0].messages[0]["content"] in p), key=len)
        assert len(mine) == 5
        assert [recv[p] for p in mine] == sorted(recv[p] for p in mine)  # sent in order
        assert mine[0].endswith(chatml("user", c.turns[0].messages[0]["content"]) + GEN)
        for k in range(1, 5):
            reply = c.turns[k - 1].reply
            assert reply is not None
            delta = "".join(chatml(m["role"], m["content"]) for m in c.turns[k].messages)
            assert mine[k] == mine[k - 1][: -len(GEN)] + chatml("assistant", reply["content"]) \
                + delta + GEN
        by_conv[c.conversation_id] = mine
    for r in rows:  # the next round waits for the previous one's end
        if r["turn_index"]:
            prev = next(x for x in rows if x["conversation_id"] == r["conversation_id"]
                        and x["turn_index"] == r["turn_index"] - 1)
            assert r["sent_at"] >= prev["sent_at"] + prev["e2e_s"] - 1e-6
    assert [r["request_chars"] for r in rows[:5]] == sorted(r["request_chars"] for r in rows[:5])


def test_live_replay_feeds_the_servers_reply_back() -> None:
    convs = shipped(1)
    res, stamps = run_fixed(dict(conversations=convs, concurrency=1, max_turns=3,
                                 max_new_tokens=6, replay="live"), ttft_ms=1, chunk_ms=1)
    assert [r["reply_source"] for r in res.rows] == ["live"] * 3
    prompts = sorted(stamps, key=len)
    live = chatml("assistant", "tok " * 6)  # the fixed server's reply: 'tok ' per token
    assert prompts[1].count(live) == 1 and prompts[2].count(live) == 2
    reply = convs[0].turns[0].reply
    assert reply is not None and reply["content"] not in prompts[1]


def _sim_at(time_scale: str) -> Iterator[SimProcess]:
    s = start_sim(["--sim-time-scale", time_scale])
    yield s
    s.stop()
    s.log_path.unlink(missing_ok=True)


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    yield from _sim_at("0.05")


@pytest.mark.parametrize("endpoint", ["generate", "chat"])
def test_simulator_live_vs_recorded(sim: SimProcess, endpoint: str) -> None:
    convs = shipped(2)
    out = {}
    for replay in ("recorded", "live"):
        spec = ConversationLoadSpec(url=sim.url, conversations=convs, endpoint=endpoint,
                                    concurrency=2, max_turns=4, max_new_tokens=12,
                                    replay=replay)
        out[replay] = asyncio.run(run_conversations(spec)).rows
    for replay, rows in out.items():
        assert [r["status"] for r in rows] == ["ok"] * 8, rows
        assert {r["reply_source"] for r in rows} == {replay}
        for c in convs:
            ctx = [r["context_tokens"] for r in rows if r["conversation_id"] == c.conversation_id]
            assert ctx == sorted(ctx) and len(set(ctx)) == 4  # the context grows every round
    rec, live = out["recorded"], out["live"]
    assert rec[0]["context_tokens"] == live[0]["context_tokens"]  # same first request
    # later rounds carry different replies: the recorded ones vs the server's 12 tokens
    assert [r["context_tokens"] for r in rec[1:4]] != [r["context_tokens"] for r in live[1:4]]


def test_trace_timestamps_and_think_times_are_honoured(tmp_path: Path) -> None:
    trace = tmp_path / "mooncake.jsonl"
    ts = [0, 400, 450, 1000, 1200]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 64 + i,
                                         "output_length": 4, "hash_ids": [1, 2 + i]}) + "\n"
                             for i, t in enumerate(ts)))
    convs, _ = load_conversations(trace)
    res, stamps = run_fixed(dict(conversations=tuple(convs), arrival="trace", time_scale=0.5,
                                 concurrency=None), ttft_ms=5, chunk_ms=2)
    rows = res.rows
    assert [r["status"] for r in rows] == ["ok"] * 5
    start = res.stats["window_start"]
    for r, t in zip(rows, ts, strict=True):
        assert r["scheduled_at"] - start == pytest.approx(t / 1000 * 0.5, abs=1e-6)
        assert 0 <= r["dispatch_lag_s"] <= DISPATCH_LAG_P99_MAX_S
    recv = sorted(s["recv"] for s in stamps.values())  # the server's own clock
    for got, t in zip(recv, ts, strict=True):
        assert got - recv[0] == pytest.approx(t / 1000 * 0.5, abs=DISPATCH_LAG_P99_MAX_S)

    # think time between rounds: the next round is due think_time_s after the previous end
    res2, _ = run_fixed(dict(conversations=shipped(1), concurrency=1, max_turns=3,
                             max_new_tokens=4, think_time="constant", think_time_s=0.15),
                        ttft_ms=2, chunk_ms=1)
    r0, r1, r2 = res2.rows
    for prev, nxt in ((r0, r1), (r1, r2)):
        gap = nxt["sent_at"] - (prev["sent_at"] + prev["e2e_s"])
        assert 0.15 - 1e-3 <= gap <= 0.15 + DISPATCH_LAG_P99_MAX_S
        assert nxt["think_time_s"] == 0.15


def test_a_killed_server_leaves_finished_rounds_and_marks_the_rest() -> None:
    s = start_sim(["--sim-time-scale", "0.05", "--sim-crash-after-requests", "3"])
    try:
        spec = ConversationLoadSpec(url=s.url, conversations=shipped(2, 6),
                                    concurrency=1, max_turns=6, max_new_tokens=8,
                                    request_timeout_s=10, connect_timeout_s=2)
        run = ConversationRun(spec)
        counter = run.tally

        async def go() -> LoadResult:
            try:
                await run.prepare()
                return await run.measure()
            finally:
                await run.aclose()

        res = asyncio.run(go())
    finally:
        s.stop()
        s.log_path.unlink(missing_ok=True)
    # live progress counts the rounds sent (3 ok of 8 tokens, 2 errors), not the skipped ones
    # (activity: each ok round's 8 one-token events and its completion; the failed rounds
    # streamed nothing)
    assert counter.progress() == {"done": 5, "tokens": 24, "errors": 2, "activity": 3 * (8 + 1)}
    first = res.rows[:6]
    assert [r["status"] for r in first] == ["ok"] * 3 + ["error", "skipped", "skipped"]
    assert all(r["ttft_s"] is not None and r["context_tokens"] for r in first[:3])
    assert first[3]["error"] and first[4]["error"] == "round 3 failed"
    second = res.rows[6:]
    assert [r["status"] for r in second] == ["error"] + ["skipped"] * 5
    assert res.stats["conversations_failed"] == 2 and res.stats["rounds_ok"] == 3


def test_load_window_end_marks_rounds_not_run() -> None:
    res, _ = run_fixed(dict(conversations=shipped(1), concurrency=1, max_turns=5,
                            max_new_tokens=4, think_time="constant", think_time_s=0.2,
                            duration_s=0.3), ttft_ms=2, chunk_ms=1)
    statuses = [r["status"] for r in res.rows]
    assert statuses == ["ok", "ok", "not_run", "not_run", "not_run"]
    assert res.rows[2]["error"] == "load window ended"


@pytest.fixture
def sim_modelled_time() -> Iterator[SimProcess]:
    # modelled time as it is: a cold prefill's cost must stand out from the process's own
    # scheduling noise (at time_scale 0.05 a few ms of it reversed the comparison)
    yield from _sim_at("1")


def test_later_round_hits_the_prefix_cache(sim_modelled_time: SimProcess) -> None:
    sim = sim_modelled_time
    conv = shipped(1)[0]
    spec = ConversationLoadSpec(url=sim.url, conversations=(conv,), concurrency=1, max_turns=4,
                                max_new_tokens=4)
    warm = asyncio.run(run_conversations(spec)).rows
    assert all(r["status"] == "ok" for r in warm)
    assert warm[0]["cached_tokens"] == 0 or warm[0]["cached_tokens"] is None
    assert warm[3]["cached_tokens"] > 0
    # a cold prompt of the same length (no shared prefix) takes longer to its first token
    cold_text = "cold " * (warm[3]["request_chars"] // 5)
    cold = Conversation("cold", (Turn(messages=({"role": "user", "content": cold_text},)),))
    spec2 = ConversationLoadSpec(url=sim.url, conversations=(cold,), concurrency=1,
                                 max_new_tokens=4)
    cold_row = asyncio.run(run_conversations(spec2)).rows[0]
    assert cold_row["cached_tokens"] in (0, None)
    assert cold_row["ttft_s"] > warm[3]["ttft_s"]


def test_open_loop_at_a_rate_starts_conversations_on_schedule() -> None:
    res, _ = run_fixed(dict(conversations=shipped(4), rate=10.0, arrival="constant",
                            concurrency=None, max_turns=2, max_new_tokens=4),
                       ttft_ms=2, chunk_ms=1)
    start = res.stats["window_start"]
    firsts = [r for r in res.rows if r["turn_index"] == 0]
    assert [r["status"] for r in res.rows] == ["ok"] * 8
    for n, r in enumerate(firsts):
        assert r["scheduled_at"] - start == pytest.approx(n * 0.1, abs=1e-6)
        assert 0 <= r["dispatch_lag_s"] <= DISPATCH_LAG_P99_MAX_S


def test_every_stream_has_a_connection_before_the_first_round() -> None:
    """No round's TTFT includes a connection set-up: the pool holds one connection per stream
    before the first request is sent."""
    from actors.loadgen.transport import StampingTransport

    events: list[str] = []

    class Recording(StampingTransport):
        async def _connect(self, key: Any, timeout: float | None) -> Any:
            events.append("connect")
            return await super()._connect(key, timeout)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            events.append("send")
            return await super().handle_async_request(request)

    mod = bench_server_module()

    async def go() -> LoadResult:
        server, port, _ = await mod.start_server(cfg=mod.ServerConfig(ttft_ms=1, chunk_ms=1))
        try:
            spec = ConversationLoadSpec(url=f"http://127.0.0.1:{port}",
                                        conversations=shipped(4, min_turns=2), concurrency=3,
                                        max_turns=2, max_new_tokens=4)
            return await run_conversations(spec, transport=Recording())
        finally:
            server.close()
            await server.wait_closed()

    res = asyncio.run(go())
    assert [r["status"] for r in res.rows] == ["ok"] * 8
    assert events[:3] == ["connect"] * 3 and "connect" not in events[3:]
    assert events.count("send") == 8
