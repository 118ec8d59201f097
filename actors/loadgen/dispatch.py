"""How a client's requests go out: the requests themselves, built once per prompt before the
window (:class:`RequestPlan`), the start gate (:class:`SendGate`), and the two dispatchers,
:func:`closed_loop` (``concurrency`` workers each sending the next request as soon as their
previous one ended; on the raw transport from inside the read that ended it) and
:func:`open_loop` (waits for each precomputed absolute arrival time, optionally takes a cap
slot, and starts the request as its own task). Each request is recorded as a ``Timeline`` the
moment it starts, in ``out``, and counted in a :class:`~actors.loadgen.tally.Tally`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import Any

import httpx

from actors.loadgen import schedule
from actors.loadgen.spec import LoadSpec
from actors.loadgen.streams import Poster, request_body, run_request
from actors.loadgen.tally import Tally
from actors.loadgen.timeline import Timeline
from actors.loadgen.transport import Follow, Send, StampingTransport

PREBUILD_LIMIT = 8192
"""Requests (one per distinct prompt) built before the load window; more are built on first
use."""

async def sleep_until(target: float) -> None:
    """Sleep until ``perf_counter() >= target`` (re-sleeps if the loop's ms timers wake early)."""
    while True:
        delay = target - perf_counter()
        if delay <= 0:
            return
        await asyncio.sleep(delay)


START_BATCH = 8
"""Request starts allowed per event-loop iteration. A start costs tens of µs of Python, so a
full batch holds the loop for a few hundred µs, under the stated precision
(actors/loadgen/selfcheck.py PRECISION_S)."""


class SendGate:
    """Lets at most ``batch`` requests start per event-loop iteration.

    Starting a request costs tens of µs of Python; when many slots free up together (a wave of
    completions: requests of one length started together end together) starting all their
    successors back to back would keep the loop from polling its sockets for milliseconds, and
    every chunk arriving meanwhile would be stamped late. With the gate, queued starts are
    spread ``batch`` per iteration with a socket poll between batches. The wait counts in
    dispatch lag (``sent_at - scheduled_at``), where the self-check sees it."""

    def __init__(self, batch: int = START_BATCH) -> None:
        self.batch = batch
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._used = 0  # starts let through in the current iteration
        self._ticking = False

    async def turn(self) -> None:
        if not self._waiters and self._used < self.batch:
            self._used += 1
            self._schedule_tick()
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._schedule_tick()
        await fut

    def _schedule_tick(self) -> None:
        if not self._ticking:
            self._ticking = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        """Next iteration: a fresh budget, spent first on the queued starts."""
        self._used = 0
        self._ticking = False
        while self._waiters and self._used < self.batch:
            fut = self._waiters.popleft()
            if not fut.done():  # skip waiters cancelled meanwhile
                fut.set_result(None)  # resumes in the next iteration, in its budget
                self._used += 1
        if self._used:
            self._schedule_tick()


class RequestPlan:
    """Prompt choice and requests for this client: built once per prompt
    (:class:`actors.loadgen.streams.Poster`) and sent straight through its transport."""

    def __init__(self, spec: LoadSpec, client: httpx.AsyncClient,
                 transport: httpx.AsyncBaseTransport) -> None:
        self.spec = spec
        self.send: Send = transport.handle_async_request
        self._serialise = (transport.prepare if isinstance(transport, StampingTransport)
                           else None)
        """Serialises a built request ahead of the window (raw transport: ~5 µs of CPU per
        request that would otherwise be spent on its first send, inside the window)."""
        self.gate = SendGate()
        self.order = schedule.prompt_order(len(spec.prompts), spec.seed)
        self._requests: dict[int, httpx.Request] = {}
        self.kind = spec.endpoint
        self.poster = Poster(spec, client)

    def prompt_index(self, position: int) -> int:
        return self.order[position % len(self.order)]

    def request(self, pidx: int) -> httpx.Request:
        req = self._requests.get(pidx)
        if req is None:
            s = self.spec
            text = s.prompts[pidx].text
            content = text if s.endpoint == "generate" else [{"role": "user", "content": text}]
            req = self.poster.request(request_body(s, content, s.max_new_tokens, s.extra_body))
            if self._serialise is not None:
                self._serialise(req)
            self._requests[pidx] = req
        return req

    def prepare(self, positions: Iterable[int], limit: int = PREBUILD_LIMIT) -> None:
        """Build the requests of these prompt positions now, before the load window."""
        for pos in itertools.islice(positions, limit):
            self.request(self.prompt_index(pos))


async def closed_loop(
    plan: RequestPlan,
    positions: Any,
    concurrency: int,
    due: Callable[[], bool] | None,
    out: list[tuple[int, int, Timeline]],
    tally: Tally,
    measured: bool = True,
) -> None:
    """``concurrency`` workers pull (index, prompt position) from one shared iterator until it
    ends or ``due()`` says stop. A request is due when its slot became free (the end of the
    slot's previous request, the window start for the first), so its dispatch lag counts every
    delay of the client's own. ``tally`` counts each request as it starts and ends
    (``measured``: False for warm-up). The end of a request is the read that completed its
    response where the transport knows it (raw: the chunked body's terminator, which a server
    may write a while after the last event; the connection cannot carry the next request
    before it), else the last read of its body (``Timeline.end``).

    On the raw transport a slot is refilled inside the read that freed it (the stream's
    ``then`` hook); other transports, a first wave and a request that failed start the next one
    from the worker, through the start gate (docs/loadgen.md, "Burst dispatch")."""
    spec = plan.spec
    it = iter(positions)
    start = perf_counter()

    def take(free_since: float) -> tuple[int, Timeline] | None:
        """The next request of a slot free since ``free_since``, counted as started; None when
        the positions ran out or ``due()`` says stop."""
        if due is not None and due():
            return None
        item = next(it, None)
        if item is None:
            return None
        n, pos = item
        pidx = plan.prompt_index(pos)
        tl = Timeline(free_since)
        out.append((n, pidx, tl))
        tally.begin(tl)
        return pidx, tl

    def refill(chained: list[tuple[tuple[int, Timeline], Send]]) -> Follow:
        def then(t: float, write: Callable[[httpx.Request], Send]) -> None:
            item = take(t)  # inside data_received, the moment the body ended
            if item is not None:
                chained.append((item, write(plan.request(item[0]))))

        return then

    async def worker() -> None:
        nxt, send = take(start), plan.send
        while nxt is not None:
            pidx, tl = nxt
            chained: list[tuple[tuple[int, Timeline], Send]] = []
            if send is plan.send:
                await plan.gate.turn()
            await run_request(plan.kind, send, plan.request(pidx), tl, spec.request_timeout_s,
                              refill(chained))
            tally.end(tl, measured)
            assert tl.end is not None
            if chained:  # due when this response ended whole (its read's stamp, in ``then``)
                nxt, send = chained[0]
            else:
                nxt, send = take(tl.end), plan.send

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def open_loop(
    plan: RequestPlan,
    arrivals: Any,
    t0: float,
    cap: int | None,
    warmup: int,
    out: list[tuple[int, int, Timeline]],
    tally: Tally,
    due: Callable[[], bool] | None = None,
) -> None:
    """Dispatch each (index, offset) at ``t0 + offset`` until ``due()`` says stop; a capped
    arrival waits for a slot. ``tally`` counts each request as it starts and ends."""
    spec = plan.spec
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(cap) if cap is not None else None
    tasks: set[asyncio.Task[Timeline]] = set()

    async def one(pidx: int, tl: Timeline) -> Timeline:
        try:
            tally.begin(tl)
            await plan.gate.turn()
            await run_request(plan.kind, plan.send, plan.request(pidx), tl,
                              spec.request_timeout_s)
            tally.end(tl)
            return tl
        finally:
            if sem is not None:
                sem.release()

    for n, off in arrivals:
        target = t0 + off
        await sleep_until(target)
        if due is not None and due():
            break
        tl = Timeline(target)
        if sem is not None:
            await sem.acquire()
            tl.slot = perf_counter()
        pidx = plan.prompt_index(warmup + n)
        out.append((n, pidx, tl))
        task = loop.create_task(one(pidx, tl))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*list(tasks))
