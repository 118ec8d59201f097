"""``run_load(spec) -> LoadResult``: the pure-asyncio core of the load generator (no Ray).

Phases: (1) warmup requests (this client's share, run closed-loop, all completed, no rows);
(2) the measured window, closed loop (``concurrency`` workers each sending the next request as
soon as their previous one ended) or open loop (a dispatcher that waits for each precomputed
absolute arrival time, optionally takes a cap slot, and starts the request as its own task),
bounded by the request count and/or ``duration_s`` of dispatching; in-flight requests drain.

Times: every interval is measured with ``time.perf_counter()``; epoch values in rows are
``perf_counter() + offset`` with one offset captured at the start (``stats["clock_offset_s"]``),
so all of a run's timestamps share one precise clock. The load window runs from the start of the
measured phase to the end of its last request.

Precision (each measured in bench/README_loadgen.md): requests are built once per prompt and
handed straight to the client's transport (no ``AsyncClient.send`` machinery per request); the
default transport parses every read inside ``data_received`` where it is stamped; request starts
go through a gate that allows one per event-loop iteration; the cyclic garbage collector is kept
out of the window. Run it on uvloop where possible (``run_load_sync``).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import Any

import httpx

from actors.loadgen import schedule
from actors.loadgen.rows import rates, request_row
from actors.loadgen.selfcheck import LoopLagMonitor, client_check
from actors.loadgen.spec import LoadResult, LoadSpec, share
from actors.loadgen.stopping import Stop, make_watch
from actors.loadgen.streams import Timeline, chat_body, generate_body, run_request
from actors.loadgen.tally import Tally
from actors.loadgen.transport import Follow, Send, StampingTransport, make_transport

PREBUILD_LIMIT = 8192
"""Requests (one per distinct prompt) built before the load window; more are built on first
use."""
WARMUP_OPEN_LOOP_CONCURRENCY = 8
"""Warmup concurrency of an uncapped open-loop cell (a capped one uses its cap)."""


def _weights(spec: LoadSpec) -> list[int]:
    """How a cell's requests are shared among its clients: by concurrency share in closed loop,
    equally in open loop."""
    n = spec.num_clients
    if spec.closed_loop:
        total = spec.cell_concurrency or 1
        return [share(total, n, j) for j in range(n)]
    return [1] * n


async def _sleep_until(target: float) -> None:
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


class _SendGate:
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


class _Plan:
    """Prompt choice and requests for this client. Requests are built once per prompt with the
    client's ``build_request`` (URL, headers, timeouts) and sent straight through its transport:
    ``AsyncClient.send`` adds auth/redirect/cookie/event-hook machinery a benchmark request does
    not use, at ~100 µs CPU per request (measured, see bench/README_loadgen.md)."""

    def __init__(self, spec: LoadSpec, client: httpx.AsyncClient,
                 transport: httpx.AsyncBaseTransport) -> None:
        self.spec = spec
        self.client = client
        self.send: Send = transport.handle_async_request
        self._serialise = (transport.prepare if isinstance(transport, StampingTransport)
                           else None)
        """Serialises a built request ahead of the window (raw transport: ~5 µs of CPU per
        request that would otherwise be spent on its first send, inside the window)."""
        self.gate = _SendGate()
        self.order = schedule.prompt_order(len(spec.prompts), spec.seed)
        self._requests: dict[int, httpx.Request] = {}
        self._template: httpx.Request | None = None
        self._raw_headers: list[tuple[bytes, bytes]] = []
        base = spec.url.rstrip("/")
        self.kind = spec.endpoint
        self.url = base + ("/generate" if spec.endpoint == "generate" else "/v1/chat/completions")
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if spec.api_key:
            self.headers["Authorization"] = f"Bearer {spec.api_key}"

    def prompt_index(self, position: int) -> int:
        return self.order[position % len(self.order)]

    def request(self, pidx: int) -> httpx.Request:
        req = self._requests.get(pidx)
        if req is None:
            s = self.spec
            text = s.prompts[pidx].text
            if s.endpoint == "generate":
                body = generate_body(text, s.max_new_tokens, s.temperature, s.ignore_eos,
                                     s.extra_body)
            else:
                body = chat_body(text, s.model, s.max_new_tokens, s.temperature, s.ignore_eos,
                                 s.extra_body)
            if self._template is None:  # the client's URL/header/timeout merge, done once
                self._template = self.client.build_request("POST", self.url, content=b"{}",
                                                           headers=self.headers)
                self._raw_headers = [(k, v) for k, v in self._template.headers.raw
                                     if k.lower() != b"content-length"]
            tmpl = self._template
            req = httpx.Request("POST", tmpl.url, content=body, extensions=dict(tmpl.extensions),
                                headers=[*self._raw_headers,
                                         (b"Content-Length", b"%d" % len(body))])
            if self._serialise is not None:
                self._serialise(req)
            self._requests[pidx] = req
        return req

    def prepare(self, positions: Iterable[int], limit: int = PREBUILD_LIMIT) -> None:
        """Build the requests of these prompt positions now, before the load window."""
        for pos in itertools.islice(positions, limit):
            self.request(self.prompt_index(pos))


async def _closed_loop(
    plan: _Plan,
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
    (``measured``: False for warm-up).

    On the raw transport a slot is refilled inside the read that freed it: the stream's
    ``then`` hook writes the slot's next request (its bytes built before the window) on the
    same connection the moment the previous body ended, and the worker collects its answer
    when it has wound the finished request down. When the simulator ends 64 streams in one
    step, their 64 successors go out in the loop turn that read the ends (a write each), not
    after 64 coroutine wake-ups, tear-downs and starts one after another (docs/loadgen.md,
    "Burst dispatch"). Other transports, a first wave and a request that failed start the
    next one from the worker, through the start gate."""
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
            if chained:
                nxt, send = chained[0]
                nxt[1].scheduled = nxt[1].slot = tl.end  # due at the end of this request
            else:
                nxt, send = take(tl.end), plan.send

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_loop(
    plan: _Plan,
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
        await _sleep_until(target)
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


class LoadRun:
    """One client's share of one cell, in two steps so that the clients of a cell can start
    together: :meth:`prepare` (build requests, open connections, run this client's warm-up
    requests, all completed) then :meth:`measure` (the measured window from ``start_at``).
    :meth:`aclose` closes the connections. :func:`run_load` chains the three.

    ``transport``: an httpx transport to use instead of building ``spec.transport`` (tests pass
    ``httpx.MockTransport``); the run takes ownership and closes it.
    """

    def __init__(self, spec: LoadSpec, transport: httpx.AsyncBaseTransport | None = None
                 ) -> None:
        self.spec = spec
        self.offset = time.time() - perf_counter()
        self.weights = _weights(spec)
        self.transport = transport if transport is not None else make_transport(
            spec.transport, tls_verify=spec.tls_verify, ca_bundle=spec.ca_bundle,
            keepalive_s=spec.keepalive_s)
        self.transport_name = spec.transport if transport is None else type(transport).__name__
        timeout = httpx.Timeout(spec.request_timeout_s, connect=spec.connect_timeout_s)
        self.client = httpx.AsyncClient(transport=self.transport, timeout=timeout)
        self.plan = _Plan(spec, self.client, self.transport)
        self.warm_results: list[tuple[int, int, Timeline]] = []
        self.results: list[tuple[int, int, Timeline]] = []
        """Measured requests sent so far (appended as they start)."""
        self.tally = Tally()
        """Live counts of this client's requests, warm-up included (:meth:`progress`)."""
        self.freeze = _GcFreeze(spec.gc_freeze)
        self.prepared = False
        self.preconnected = 0
        """Connections opened ahead of the window by :meth:`prepare` (beyond the warm-up's)."""

    def progress(self) -> dict[str, int]:
        """Measured requests finished so far, their output tokens, how many failed, and the
        activity (chunks and completions, warm-up included) the driver's stall watch follows:
        read from another thread while the load runs (actors/loadgen/tally.py)."""
        return self.tally.progress()

    async def prepare(self) -> dict[str, Any]:
        """Warm-up (this client's share of ``warmup_requests``, closed loop, all completed) and
        request building; returns ``{"warmup_requests", "warmup_errors", "ready_at"}``."""
        spec = self.spec
        warm_idx = list(schedule.client_indices(spec.warmup_requests, self.weights,
                                                spec.client_index))
        if warm_idx:
            wconc = spec.my_concurrency or min(len(warm_idx), WARMUP_OPEN_LOOP_CONCURRENCY)
            await _closed_loop(self.plan, ((w, w) for w in warm_idx), wconc, None,
                               self.warm_results, self.tally, measured=False)
        self.preconnected = await self._preconnect()
        n_plan = spec.num_requests if spec.num_requests is not None else PREBUILD_LIMIT
        self.plan.prepare(spec.warmup_requests + n for n in schedule.client_indices(
            min(n_plan, PREBUILD_LIMIT), self.weights, spec.client_index))
        self.freeze.engage()  # before the barrier: the collector's pass costs no start time
        self.prepared = True
        return {"warmup_requests": len(self.warm_results),
                "warmup_errors": sum(1 for *_, tl in self.warm_results if tl.error is not None),
                "ready_at": time.time()}

    async def _preconnect(self) -> int:
        """Top the pool up to one idle connection per stream of this client (its concurrency
        share; none for an uncapped open loop, whose in-flight count has no bound), so that no
        measured request's TTFT includes a connection set-up: a warm-up of fewer requests than
        streams (``load.warmup_requests`` defaults to 2) leaves the first wave to connect
        during the window otherwise. Only the raw transport can open connections without a
        request; a failure here is left to the measured requests to report."""
        want = self.spec.my_concurrency
        if not want or not isinstance(self.transport, StampingTransport):
            return 0
        try:
            return await self.transport.preconnect(self.plan.url, want,
                                                   self.spec.connect_timeout_s)
        except httpx.TransportError:
            return 0

    async def measure(self, start_at: float | None = None) -> LoadResult:
        """The measured window. ``start_at`` (epoch s): when it opens; one already past
        re-anchors the window (and an open-loop schedule) at now rather than firing the
        arrivals it missed at once; how late it was is ``stats["start_late_s"]``."""
        if not self.prepared:
            await self.prepare()
        try:
            result = await self._measure(start_at, self.freeze)
        finally:
            self.freeze.release()
        result.stats["gc_collected"] = self.freeze.collected
        return result

    async def aclose(self) -> None:
        self.freeze.release()
        await self.client.aclose()

    async def _measure(self, start_at: float | None, freeze: _GcFreeze) -> LoadResult:
        spec, plan, offset = self.spec, self.plan, self.offset
        me, conc = spec.client_index, spec.my_concurrency
        results = self.results
        now = perf_counter()
        t0, late = now, 0.0
        if start_at is not None:
            t0 = start_at - offset
            if t0 > now:
                await _sleep_until(t0)
            else:
                late, t0 = now - t0, now
        stop = Stop(t0 + spec.duration_s if spec.duration_s is not None else None)
        watch = make_watch(spec, self.weights, stop)  # targets, over-saturation
        monitor = LoopLagMonitor()
        monitor.start()
        watch.start(results)
        if spec.closed_loop:
            if conc:
                idx = schedule.client_indices(spec.num_requests, self.weights, me)
                await _closed_loop(plan, ((n, spec.warmup_requests + n) for n in idx),
                                   conc, stop.due, results, self.tally)
        else:
            assert spec.rate is not None
            arrivals = schedule.client_arrivals(
                spec.num_requests, self.weights, me, spec.rate, spec.arrival, spec.burstiness,
                spec.seed, horizon_s=spec.duration_s,
            )  # the horizon is the time bound here: `due` only asks for the watch's stop
            await _open_loop(plan, arrivals, t0, conc, spec.warmup_requests, results,
                             self.tally, lambda: stop.reason is not None)
        await watch.close()
        await monitor.stop()
        results.sort(key=lambda r: r[0])
        rows = [request_row(spec, n, pidx, tl, offset) for n, pidx, tl in results]
        t_end = max((tl.end for _, _, tl in results if tl.end is not None), default=t0)
        stats = client_check([tl for *_, tl in results],
                             conc or 0 if spec.closed_loop else 0, monitor, t0)
        stats.update(
            window_start=t0 + offset,
            window_end=t_end + offset,
            start_late_s=late,
            measured_requests=len(rows),
            warmup_requests=len(self.warm_results),
            warmup_errors=sum(1 for *_, tl in self.warm_results if tl.error is not None),
            preconnected=self.preconnected,
            client_index=spec.client_index,
            num_clients=spec.num_clients,
            transport=self.transport_name,
            gc_paused=freeze.engaged,
            clock_offset_s=offset,
            event_loop=type(asyncio.get_running_loop()).__module__,
            **rates(spec, results, offset),
            **watch.final(results, spec, self.weights, offset),
        )
        return LoadResult(rows=rows, stats=stats)


async def run_load(
    spec: LoadSpec, transport: httpx.AsyncBaseTransport | None = None
) -> LoadResult:
    """Drive this client's share of the cell described by ``spec`` (warm-up, then the window
    from ``spec.start_at``); return its rows and stats. See :class:`LoadRun`."""
    run = LoadRun(spec, transport)
    try:
        await run.prepare()
        return await run.measure(spec.start_at)
    finally:
        await run.aclose()


class _GcFreeze:
    """The collector out of the load window: right before it ``gc.collect(); gc.freeze()`` (every
    object that exists then - modules, the actor's state, the prebuilt requests - leaves the
    generations) and ``gc.disable()``; after it ``gc.enable()``, ``gc.unfreeze()`` and one
    ``gc.collect()`` whose count is reported as ``gc_collected``.

    Why: with the collector on, a young-generation pass over the objects of a few hundred
    in-flight requests takes 1-2 ms (measured), and every chunk that arrives meanwhile is
    stamped that much late. The load path makes (almost) no reference cycles, so objects are
    freed by reference counting while the collector is off (``gc_collected`` shows what was
    left). Skipped when someone else already froze objects or disabled the collector."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and not gc.get_freeze_count() and gc.isenabled()
        self.engaged = False
        self.collected: int | None = None

    def engage(self) -> None:
        if self.enabled and not self.engaged:
            gc.collect()
            gc.freeze()
            gc.disable()
            self.engaged = True

    def release(self) -> None:
        if self.engaged:
            gc.enable()
            gc.unfreeze()
            self.collected = gc.collect()
            self.engaged = False


def run_load_sync(
    spec: LoadSpec,
    transport_factory: Callable[[], httpx.AsyncBaseTransport] | None = None,
    use_uvloop: bool = True,
) -> LoadResult:
    """Run :func:`run_load` on a fresh event loop (uvloop when installed and asked for) in the
    calling thread, which must have no running loop."""

    async def main() -> LoadResult:
        return await run_load(spec, transport_factory() if transport_factory else None)

    return new_event_loop_runner(use_uvloop)(main())


def new_event_loop_runner(use_uvloop: bool = True) -> Callable[[Any], Any]:
    """``uvloop.run`` when uvloop is installed and asked for, else ``asyncio.run``."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run
    return asyncio.run
