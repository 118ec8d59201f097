"""Is the load generator itself the bottleneck? Event-loop latency, dispatch lag, merged reads,
CPU of the event-loop thread.

The thresholds follow from the precision specgrid states for its timestamps, ``PRECISION_S``
(1 ms at p99, docs/loadgen.md). A cell is flagged ``client_saturated`` (with a reason naming
every tripped check) when any of:

* **loop latency** p99 > ``PRECISION_S``: a probe that asks the loop for its next turn
  (``call_soon``) waited longer; a socket that became readable meanwhile was stamped that late,
  so the stated precision does not hold.
* **dispatch lag** p99 > ``DISPATCH_LAG_P99_MAX_S`` (``PRECISION_S`` + the loop's 1 ms timer
  resolution: an open-loop arrival is woken by a timer that libuv and asyncio round to whole
  milliseconds, + ``OS_SCHEDULING_S`` for the operating system handing the client's thread a
  core: on the 2-core CI machine, with Ray's own processes beside it, a healthy client of 8
  requests showed a dispatch lag p99 of 4.9 ms): requests left later than they should have.
  Closed loop: from the *end of the previous request of the same slot* to the send (not from
  when the worker resumed, which hides a slow loop); open loop: from the scheduled arrival,
  minus any wait for a concurrency-cap slot (the configured cap at work). A closed loop's first
  wave (all due at the window start, started one per loop turn) is excluded from the check
  (not from the reported ``dispatch_lag_*``).
* **merged reads** > ``MERGED_READ_FRACTION_MAX`` (1 %) of chunk gaps: several token events
  arrived in one socket read, so they share one stamp (a gap of 0 and an inflated gap before
  it). Above 1 % of gaps this reaches the p99 of ITL and chunk gaps.
* **CPU** >= ``CPU_PERCENT_MAX`` (90 %) of one core, thread CPU time of the event loop over the
  steady window (all of the cell's slots busy: from the end of the first wave to the last
  dispatch; the whole window when that is too short): a loop that busy queues every event
  behind the ones ahead of it. Averaging over the ramp and the drain tail would hide it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from time import perf_counter
from typing import Any

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
            loop.call_soon(fut.set_result, None)
            await fut
            now = perf_counter()
            lags.append(now - t)
            samples.append((now, time.thread_time()))

    async def stop(self) -> None:
        self.cpu_samples.append((perf_counter(), time.thread_time()))
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
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


def verdict(
    dispatch_lags: Sequence[float],
    client_lags: Sequence[float],
    loop_lags: Sequence[float],
    cpu_percent: float,
    merged_reads: int = 0,
    chunk_gaps: int = 0,
) -> dict[str, Any]:
    """The self-check stats and the saturation verdict (see the module doc for the thresholds).

    ``dispatch_lags``: sent - scheduled per request (reported); ``client_lags``: the lags the
    check looks at (no cap waits, no closed-loop first wave); ``loop_lags``: loop latency probes;
    ``cpu_percent``: of one core over the steady window; ``merged_reads``: token events that
    shared a read with the previous one; ``chunk_gaps``: gaps between token events in all."""
    d50 = percentile(dispatch_lags, 50)
    d99 = percentile(dispatch_lags, 99)
    c99 = percentile(client_lags, 99)
    l50 = percentile(loop_lags, 50)
    l99 = percentile(loop_lags, 99)
    merged_fraction = merged_reads / chunk_gaps if chunk_gaps else 0.0
    reasons: list[str] = []
    if c99 is not None and c99 > DISPATCH_LAG_P99_MAX_S:
        reasons.append(
            f"dispatch lag p99 {c99 * 1e3:.2f} ms > {DISPATCH_LAG_P99_MAX_S * 1e3:g} ms"
        )
    if l99 is not None and l99 > LOOP_LAG_P99_MAX_S:
        reasons.append(f"event-loop latency p99 {l99 * 1e3:.2f} ms > "
                       f"{LOOP_LAG_P99_MAX_S * 1e3:g} ms")
    if merged_fraction > MERGED_READ_FRACTION_MAX:
        reasons.append(f"{merged_fraction:.1%} of chunk gaps merged into one read "
                       f"> {MERGED_READ_FRACTION_MAX:.0%}")
    if cpu_percent >= CPU_PERCENT_MAX:
        reasons.append(f"client CPU {cpu_percent:.0f}% >= {CPU_PERCENT_MAX:g}% of one core")
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
