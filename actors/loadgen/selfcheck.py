"""Is the load generator itself the bottleneck? Event-loop latency, dispatch stalls, merged
reads, CPU of the event-loop thread.

Every threshold follows from the stated timestamp precision, ``PRECISION_S``; a cell is
flagged ``client_saturated`` with a reason naming every tripped check. The checks, their
thresholds and why a burst of requests due together is no stall (:func:`stalls`):
docs/loadgen.md ("Self-check")."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence
from time import perf_counter
from typing import Any

from actors.loadgen.timeline import Timeline
from specgrid_metrics.requests import percentile

PRECISION_S = 0.001
"""Stated timestamp precision: p99 error of TTFT / ITL stamps (docs/loadgen.md)."""
TIMER_RESOLUTION_S = 0.001
"""asyncio and libuv timers wake whole milliseconds late at worst."""
LOOP_LAG_P99_MAX_S = PRECISION_S
OS_SCHEDULING_S = 0.003
"""Allowance for the thread being scheduled late by the OS on a small shared machine."""
DISPATCH_LAG_P99_MAX_S = PRECISION_S + TIMER_RESOLUTION_S + OS_SCHEDULING_S
MERGED_READ_FRACTION_MAX = 0.01
CPU_PERCENT_MAX = 90.0
TICK_S = 0.005
MIN_STEADY_S = 3 * TICK_S


class LoopLagMonitor:
    """Every ``TICK_S`` asks the loop for its next turn (``call_soon``) and records how long that
    took (the latency any ready socket sees), and samples the thread's CPU time."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self.lags: list[float] = []
        self.cpu_samples: list[tuple[float, float]] = []
        """(perf_counter, thread CPU time) per tick."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.cpu_samples.append((perf_counter(), time.thread_time()))
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        lags = self.lags
        samples = self.cpu_samples
        while True:
            await asyncio.sleep(self.tick_s)
            fut = loop.create_future()
            t = perf_counter()
            loop.call_soon(_resolve, fut)
            await fut
            now = perf_counter()
            lags.append(now - t)
            samples.append((now, time.thread_time()))

    async def stop(self) -> None:
        self.cpu_samples.append((perf_counter(), time.thread_time()))
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def cpu_percent(self, start: float | None = None, end: float | None = None) -> float:
        """Thread CPU / wall time between the samples closest inside [start, end] (the whole
        monitored time when the span is shorter than ``MIN_STEADY_S`` or not given)."""
        s = self.cpu_samples
        if len(s) < 2:
            return 0.0
        inside = s
        if start is not None and end is not None and end - start >= MIN_STEADY_S:
            inside = [x for x in s if start <= x[0] <= end]
        if len(inside) < 2:
            inside = s
        (w0, c0), (w1, c1) = inside[0], inside[-1]
        return 100.0 * (c1 - c0) / (w1 - w0) if w1 > w0 else 0.0


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():  # the probe may have been cancelled meanwhile (``stop``)
        fut.set_result(None)


def stalls(timelines: Iterable[Timeline]) -> list[float]:
    """Per request, in send order, the part of its dispatch lag that no earlier send of this
    client accounts for: ``sent - max(due, previous send)``, where ``due`` is when it fell due
    (``scheduled``, or ``slot`` when it waited for a concurrency-cap slot). See the module
    doc."""
    out: list[float] = []
    previous = float("-inf")
    for tl in sorted(timelines, key=lambda tl: tl.sent):
        out.append(max(0.0, tl.sent - max(tl.scheduled, tl.slot, previous)))
        previous = tl.sent
    return out


def client_check(timelines: Sequence[Timeline], wave: int, monitor: LoopLagMonitor,
                 t0: float) -> dict[str, Any]:
    """The self-check of one client's window: its requests' timelines, the number of slots a
    closed loop fills at the window start (``wave``; 0 in open loop), the loop monitor, the
    window start. CPU is taken over the steady window (every slot busy: from the end of the
    first wave to the last dispatch; the whole window in open loop)."""
    by_send = sorted(timelines, key=lambda tl: tl.sent)
    steady_start = by_send[wave - 1].sent if wave and len(by_send) >= wave else t0
    steady_end = by_send[-1].sent if by_send else t0
    return verdict(
        [tl.sent - tl.scheduled for tl in timelines], stalls(timelines), monitor.lags,
        monitor.cpu_percent(steady_start, steady_end),
        sum(tl.merged for tl in timelines),
        sum(max(0, len(tl.chunk_times) - 1) for tl in timelines))


def verdict(
    dispatch_lags: Sequence[float],
    client_lags: Sequence[float],
    loop_lags: Sequence[float],
    cpu_percent: float,
    merged_reads: int = 0,
    chunk_gaps: int = 0,
) -> dict[str, Any]:
    """The self-check stats and the saturation verdict (the thresholds: docs/loadgen.md).

    ``dispatch_lags``: sent - scheduled per request (reported); ``client_lags``: what the
    dispatch check looks at (:func:`stalls`); ``loop_lags``: loop latency probes;
    ``cpu_percent``: of one core over the steady window; ``merged_reads``: token events that
    shared a read with the previous one; ``chunk_gaps``: gaps between token events in all."""
    d50 = percentile(dispatch_lags, 50)
    d99 = percentile(dispatch_lags, 99)
    c99 = percentile(client_lags, 99)
    l50 = percentile(loop_lags, 50)
    l99 = percentile(loop_lags, 99)
    merged_fraction = merged_reads / chunk_gaps if chunk_gaps else 0.0
    reasons: list[str] = []
    if l99 is not None and l99 > LOOP_LAG_P99_MAX_S:
        reasons.append(f"event-loop lag: latency p99 {l99 * 1e3:.2f} ms > "
                       f"{LOOP_LAG_P99_MAX_S * 1e3:g} ms")
    if cpu_percent >= CPU_PERCENT_MAX:
        reasons.append(f"CPU: event-loop thread at {cpu_percent:.0f}% >= {CPU_PERCENT_MAX:g}% "
                       "of one core")
    if c99 is not None and c99 > DISPATCH_LAG_P99_MAX_S:
        reasons.append(f"dispatch stall: due requests waited with nothing sent, p99 "
                       f"{c99 * 1e3:.2f} ms > {DISPATCH_LAG_P99_MAX_S * 1e3:g} ms")
    if merged_fraction > MERGED_READ_FRACTION_MAX:
        reasons.append(f"merged reads: {merged_fraction:.1%} of chunk gaps merged into one read "
                       f"> {MERGED_READ_FRACTION_MAX:.0%}")
    return {
        "client_saturated": bool(reasons),
        "saturation_reason": "; ".join(reasons) if reasons else None,
        "dispatch_lag_p50_s": d50,
        "dispatch_lag_p99_s": d99,
        "client_dispatch_lag_p99_s": c99,
        "loop_lag_p50_s": l50,
        "loop_lag_p99_s": l99,
        "client_cpu_percent": cpu_percent,
        "merged_reads": merged_reads,
        "chunk_gaps": chunk_gaps,
        "merged_read_fraction": merged_fraction,
    }
