"""How requests go out (actors/loadgen/dispatch.py): the start gate, and the closed loop's refill
from inside the read that ended a slot's request, over real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from actors.loadgen.dispatch import SendGate
from actors.loadgen.runner import run_load
from actors.loadgen.spec import LoadSpec
from actors.loadgen.transport import Send, StampingTransport
from tests.actors.bench_server import bench_server_module
from tests.actors.test_runner import PROMPTS


class CountingTransport(StampingTransport):
    """The raw transport, counting requests sent from a worker and from inside a read."""

    def __init__(self) -> None:
        super().__init__()
        self.from_worker = 0
        self.from_read = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.from_worker += 1
        return await super().handle_async_request(request)

    def _follow(self, conn: Any, request: httpx.Request) -> Send:
        self.from_read += 1
        return super()._follow(conn, request)


def test_closed_loop_refills_each_slot_from_the_read_that_ended_it() -> None:
    async def go() -> tuple[Any, CountingTransport]:
        mod = bench_server_module()
        server, port, _ = await mod.start_server(cfg=mod.ServerConfig(record=False))
        tr = CountingTransport()
        try:
            res = await run_load(LoadSpec(
                url=f"http://127.0.0.1:{port}/sched/1/1", prompts=PROMPTS, concurrency=4,
                num_requests=40, warmup_requests=4, max_new_tokens=6), transport=tr)
        finally:
            server.close()
            await server.wait_closed()
        return res, tr

    res, tr = asyncio.run(go())
    assert [r["status"] for r in res.rows] == ["ok"] * 40
    # the warm-up's and the window's first wave start from their workers; every later request
    # went out from the read that ended its slot's previous one; nothing beyond the count
    assert tr.from_worker == 4 + 4
    assert tr.from_read == 40 - 4
    for r in res.rows:  # due at its slot's previous end, sent after it
        assert r["sent_at"] >= r["scheduled_at"]


@pytest.mark.parametrize("batch", [1, 3])
def test_send_gate_lets_a_batch_of_requests_start_per_loop_iteration(batch: int) -> None:
    async def go() -> list[int]:
        loop = asyncio.get_running_loop()
        turn = {"n": 0}

        def tick() -> None:
            turn["n"] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        gate = SendGate(batch)
        passed: list[int] = []

        async def starter() -> None:
            await gate.turn()
            passed.append(turn["n"])

        await asyncio.gather(*(starter() for _ in range(7)))
        return passed

    passed = asyncio.run(go())
    assert len(passed) == 7
    per_iteration = [passed.count(n) for n in sorted(set(passed))]
    assert max(per_iteration) == batch and len(per_iteration) == -(-7 // batch)
