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
from actors.loadgen.selfcheck import LoopLagMonitor, verdict
from actors.loadgen.spec import ROW_KEYS, LoadResult, LoadSpec, Prompt, share
from actors.loadgen.streams import Timeline, chat_body, generate_body, run_request
from actors.loadgen.transport import make_transport
from grid.metrics import accept_length, request_timing

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


class _SendGate:
    """Lets at most one request start per event-loop iteration.

    Starting a request costs ~50 µs of Python; when many slots free up together (a wave of
    completions) starting all their successors back to back would keep the loop from polling
    its sockets for milliseconds, and every chunk arriving meanwhile would be stamped late. With
    the gate, queued starts are spread one per iteration with a socket poll between them. The
    wait counts in dispatch lag (``sent_at - scheduled_at``), where the self-check sees it."""

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._open = True

    async def turn(self) -> None:
        if self._open and not self._waiters:
            self._open = False
            asyncio.get_running_loop().call_soon(self._tick)
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        await fut

    def _tick(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():  # skip waiters cancelled meanwhile
                fut.set_result(None)
                asyncio.get_running_loop().call_soon(self._tick)
                return
        self._open = True


class _Plan:
    """Prompt choice and requests for this client. Requests are built once per prompt with the
    client's ``build_request`` (URL, headers, timeouts) and sent straight through its transport:
    ``AsyncClient.send`` adds auth/redirect/cookie/event-hook machinery a benchmark request does
    not use, at ~100 µs CPU per request (measured, see bench/README_loadgen.md)."""

    def __init__(self, spec: LoadSpec, client: httpx.AsyncClient,
                 transport: httpx.AsyncBaseTransport) -> None:
        self.spec = spec
        self.client = client
        self.send = transport.handle_async_request
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
    deadline: float | None,
    out: list[tuple[int, int, Timeline]],
) -> None:
    """``concurrency`` workers pull (index, prompt position) from one shared iterator."""
    spec = plan.spec
    it = iter(positions)

    async def worker() -> None:
        for n, pos in it:
            now = perf_counter()
            if deadline is not None and now >= deadline:
                return
            pidx = plan.prompt_index(pos)
            tl = Timeline(now)
            out.append((n, pidx, tl))
            await plan.gate.turn()
            await run_request(plan.kind, plan.send, plan.request(pidx), tl,
                              spec.request_timeout_s)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_loop(
    plan: _Plan,
    arrivals: Any,
    t0: float,
    cap: int | None,
    warmup: int,
    out: list[tuple[int, int, Timeline]],
) -> None:
    """Dispatch each (index, offset) at ``t0 + offset``; a capped arrival waits for a slot."""
    spec = plan.spec
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(cap) if cap is not None else None
    tasks: set[asyncio.Task[Timeline]] = set()

    async def one(pidx: int, tl: Timeline) -> Timeline:
        try:
            await plan.gate.turn()
            return await run_request(plan.kind, plan.send, plan.request(pidx), tl,
                                     spec.request_timeout_s)
        finally:
            if sem is not None:
                sem.release()

    for n, off in arrivals:
        target = t0 + off
        await _sleep_until(target)
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


def _row(spec: LoadSpec, n: int, pidx: int, tl: Timeline, offset: float) -> dict[str, Any]:
    prompt: Prompt = spec.prompts[pidx]
    ok = tl.error is None
    timing = request_timing(tl.sent, tl.chunk_times, tl.chunk_tokens, tl.end, tl.output_tokens)
    row = {
        "request_id": f"c{spec.client_index}-{n}",
        "prompt_id": prompt.prompt_id,
        "domain": prompt.domain,
        "status": "ok" if ok else "error",
        "error": tl.error,
        "input_tokens": tl.input_tokens,
        "output_tokens": tl.output_tokens,
        "scheduled_at": tl.scheduled + offset,
        "sent_at": tl.sent + offset,
        "ttft_s": timing["ttft_s"],
        "e2e_s": timing["e2e_s"],
        "tpot_s": timing["tpot_s"] if ok else None,
        "itl_s": timing["itl_s"],
        "accept_length": accept_length(tl.output_tokens, tl.spec_verify_ct) if ok else None,
        "spec_verify_ct": tl.spec_verify_ct,
        "finish_reason": tl.finish_reason,
    }
    assert tuple(row) == ROW_KEYS
    return row


async def run_load(
    spec: LoadSpec, transport: httpx.AsyncBaseTransport | None = None
) -> LoadResult:
    """Drive this client's share of the cell described by ``spec``; return its rows and stats.

    ``transport``: an httpx transport to use instead of building ``spec.transport`` (tests pass
    ``httpx.MockTransport``); the client takes ownership and closes it.
    """
    offset = time.time() - perf_counter()
    weights = _weights(spec)
    warm_idx = list(schedule.client_indices(spec.warmup_requests, weights, spec.client_index))
    tr = transport if transport is not None else make_transport(spec.transport,
                                                                  spec.connect_timeout_s)
    timeout = httpx.Timeout(spec.request_timeout_s, connect=spec.connect_timeout_s)
    monitor = LoopLagMonitor()
    freeze = _GcFreeze(spec.gc_freeze)
    try:
        result = await _run(spec, tr, timeout, offset, weights, warm_idx, monitor, freeze)
    finally:
        freeze.release()
    result.stats["gc_collected"] = freeze.collected
    return result


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


async def _run(
    spec: LoadSpec,
    tr: httpx.AsyncBaseTransport,
    timeout: httpx.Timeout,
    offset: float,
    weights: list[int],
    warm_idx: list[int],
    monitor: LoopLagMonitor,
    freeze: _GcFreeze,
) -> LoadResult:
    me = spec.client_index
    conc = spec.my_concurrency
    results: list[tuple[int, int, Timeline]] = []
    warm_results: list[tuple[int, int, Timeline]] = []
    async with httpx.AsyncClient(transport=tr, timeout=timeout) as client:
        plan = _Plan(spec, client, tr)
        if warm_idx:
            wconc = conc or min(len(warm_idx), WARMUP_OPEN_LOOP_CONCURRENCY)
            await _closed_loop(plan, ((w, w) for w in warm_idx), wconc, None,
                               warm_results)
        n_plan = spec.num_requests if spec.num_requests is not None else PREBUILD_LIMIT
        plan.prepare(spec.warmup_requests + n
                     for n in schedule.client_indices(min(n_plan, PREBUILD_LIMIT), weights, me))
        freeze.engage()
        now = perf_counter()
        t0 = now
        if spec.start_at is not None:
            t0 = spec.start_at - offset
            if t0 > now:
                await _sleep_until(t0)
            elif spec.closed_loop:
                t0 = now
        deadline = t0 + spec.duration_s if spec.duration_s is not None else None
        monitor.start()
        if spec.closed_loop:
            if conc:
                idx = schedule.client_indices(spec.num_requests, weights, me)
                await _closed_loop(plan,
                                   ((n, spec.warmup_requests + n) for n in idx),
                                   conc, deadline, results)
        else:
            assert spec.rate is not None
            arrivals = schedule.client_arrivals(
                spec.num_requests, weights, me, spec.rate, spec.arrival, spec.burstiness,
                spec.seed, horizon_s=spec.duration_s,
            )
            await _open_loop(plan, arrivals, t0, conc, spec.warmup_requests, results)
        await monitor.stop()
    results.sort(key=lambda r: r[0])
    rows = [_row(spec, n, pidx, tl, offset) for n, pidx, tl in results]
    t_end = max((tl.end for _, _, tl in results if tl.end is not None), default=t0)
    lags = [tl.sent - tl.scheduled for _, _, tl in results]
    # the saturation check looks at the steady state: a closed loop's first wave is scheduled
    # all at once at the window start and necessarily goes out one request per loop turn
    by_send = sorted(results, key=lambda r: r[2].scheduled)
    steady = by_send[conc or 0:] if spec.closed_loop else by_send
    client_lags = [tl.sent - max(tl.scheduled, tl.slot) for _, _, tl in steady]
    stats = verdict(lags, client_lags, monitor.lags, monitor.cpu_percent)
    stats.update(
        window_start=t0 + offset,
        window_end=t_end + offset,
        measured_requests=len(rows),
        warmup_requests=len(warm_results),
        warmup_errors=sum(1 for _, _, tl in warm_results if tl.error is not None),
        client_index=spec.client_index,
        num_clients=spec.num_clients,
        transport=type(tr).__name__,
        gc_paused=freeze.engaged,
        clock_offset_s=offset,
        event_loop=type(asyncio.get_running_loop()).__module__,
    )
    return LoadResult(rows=rows, stats=stats)


def run_load_sync(
    spec: LoadSpec,
    transport_factory: Callable[[], httpx.AsyncBaseTransport] | None = None,
    use_uvloop: bool = True,
) -> LoadResult:
    """Run :func:`run_load` on a fresh event loop (uvloop when installed and asked for) in the
    calling thread, which must have no running loop. A Ray actor can call it through
    ``await asyncio.to_thread(run_load_sync, spec)`` to keep the load off the actor's own loop."""

    async def main() -> LoadResult:
        return await run_load(spec, transport_factory() if transport_factory else None)

    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main())
    return asyncio.run(main())
