"""``run_load(spec) -> LoadResult``: the pure-asyncio core of the load generator (no Ray).

Phases: (1) warmup requests (this client's share, run closed-loop, all completed, no rows);
(2) the measured window, closed loop or open loop (actors/loadgen/dispatch.py), bounded by the
request count and/or ``duration_s`` of dispatching; in-flight requests drain. Then the rows, the
self-check (actors/loadgen/selfcheck.py) and the arrival rates.

Times: every interval is measured with ``time.perf_counter()``; epoch values in rows are
``perf_counter() + offset`` with one offset captured at the start (``stats["clock_offset_s"]``),
so all of a run's timestamps share one precise clock. The load window runs from the start of the
measured phase to the end of its last request.

What keeps the stamps precise (requests built before the window, stamping and parsing in
``data_received``, burst refills, the start gate, the collector kept out of the window, uvloop:
``run_load_sync``): docs/loadgen.md, measured in bench/README_loadgen.md.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

import httpx

from actors.loadgen import schedule
from actors.loadgen.dispatch import (
    PREBUILD_LIMIT,
    RequestPlan,
    closed_loop,
    open_loop,
    sleep_until,
)
from actors.loadgen.rows import rates, request_row
from actors.loadgen.selfcheck import LoopLagMonitor, client_check
from actors.loadgen.spec import LoadResult, LoadSpec, share
from actors.loadgen.stopping import Stop, make_watch
from actors.loadgen.streams import open_client, preconnect
from actors.loadgen.tally import Tally
from actors.loadgen.timeline import Clock, Timeline

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
        self.transport, self.client = open_client(spec, transport)
        self.transport_name = spec.transport if transport is None else type(transport).__name__
        self.plan = RequestPlan(spec, self.client, self.transport)
        self.warm_results: list[tuple[int, int, Timeline]] = []
        self.results: list[tuple[int, int, Timeline]] = []
        """Measured requests sent so far (appended as they start)."""
        self.tally = Tally()
        """Live counts of this client's requests, warm-up included, read from another thread while
        the load runs (actors/loadgen/tally.py)."""
        self.freeze = _GcFreeze(spec.gc_freeze)
        self.prepared = False
        self.preconnected = 0
        """Connections opened ahead of the window by :meth:`prepare` (beyond the warm-up's)."""

    async def prepare(self) -> dict[str, Any]:
        """Warm-up (this client's share of ``warmup_requests``, closed loop, all completed) and
        request building; returns ``{"warmup_requests", "warmup_errors", "ready_at"}``."""
        spec = self.spec
        warm_idx = list(schedule.client_indices(spec.warmup_requests, self.weights,
                                                spec.client_index))
        if warm_idx:
            wconc = spec.my_concurrency or min(len(warm_idx), WARMUP_OPEN_LOOP_CONCURRENCY)
            await closed_loop(self.plan, ((w, w) for w in warm_idx), wconc, None,
                               self.warm_results, self.tally, measured=False)
        # one idle connection per stream (none for an uncapped open loop: no bound on its
        # streams): a warm-up of fewer requests than streams leaves the rest to the window
        self.preconnected = await preconnect(self.transport, self.plan.poster,
                                             spec.my_concurrency, spec.connect_timeout_s)
        n_plan = spec.num_requests if spec.num_requests is not None else PREBUILD_LIMIT
        self.plan.prepare(spec.warmup_requests + n for n in schedule.client_indices(
            min(n_plan, PREBUILD_LIMIT), self.weights, spec.client_index))
        self.freeze.engage()  # before the barrier: the collector's pass costs no start time
        self.prepared = True
        return {"warmup_requests": len(self.warm_results),
                "warmup_errors": sum(1 for *_, tl in self.warm_results if tl.error is not None),
                "ready_at": time.time()}

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
                await sleep_until(t0)
            else:
                late, t0 = now - t0, now
        clock = Clock(t0, spec.clock_scale)
        stop = Stop(t0 + clock.wall(spec.duration_s) if spec.duration_s is not None else None)
        watch = make_watch(spec, self.weights, stop)  # targets, over-saturation
        monitor = LoopLagMonitor()
        monitor.start()
        watch.start(results)
        if spec.closed_loop:
            if conc:
                idx = schedule.client_indices(spec.num_requests, self.weights, me)
                await closed_loop(plan, ((n, spec.warmup_requests + n) for n in idx),
                                   conc, stop.due, results, self.tally)
        else:
            assert spec.rate is not None
            # on the wall's clock: the rate over the scale (offsets x scale, the same draws);
            # the horizon is the time bound here: `due` only asks for the watch's stop
            args = (spec.num_requests, self.weights, me, spec.rate / clock.scale, spec.arrival,
                    spec.burstiness, spec.seed,
                    None if spec.duration_s is None else clock.wall(spec.duration_s))
            if conc is not None:  # the watch counts the arrivals waiting for a slot
                watch.schedule = (t0 + off for _, off in schedule.client_arrivals(*args))
            await open_loop(plan, schedule.client_arrivals(*args), t0, conc,
                            spec.warmup_requests, results, self.tally,
                            lambda: stop.reason is not None)
        await watch.close()
        await monitor.stop()
        results.sort(key=lambda r: r[0])
        results[:] = [(n, pidx, clock.modelled(tl)) for n, pidx, tl in results]
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


def run_load_sync(spec: LoadSpec) -> LoadResult:
    """Run :func:`run_load` on a fresh event loop (uvloop when installed) in the calling
    thread, which must have no running loop."""
    return new_event_loop_runner()(run_load(spec))


def new_event_loop_runner() -> Callable[[Any], Any]:
    """``uvloop.run`` when uvloop is installed, else ``asyncio.run``."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run
