"""Is the load generator itself the bottleneck? Client CPU use, event-loop lag, dispatch lag.

A cell is flagged ``client_saturated`` (with a reason naming every tripped check) when any of:

* client dispatch lag p99 > ``DISPATCH_LAG_P99_MAX_S`` (10 ms): requests left later than their
  scheduled time for reasons of the client's own. Excluded from this check (but included in the
  reported ``dispatch_lag_*``, defined in docs/architecture.md: sent_at - scheduled_at): time
  spent waiting for a concurrency-cap slot (the configured cap at work) and a closed loop's first
  wave (all scheduled at the window start, started one per event-loop turn, ~50 us each);
* event-loop lag p99 > ``LOOP_LAG_P99_MAX_S`` (5 ms): a ticker that sleeps ``TICK_S`` overslept,
  so every timestamp taken by the loop may be late by as much;
* client CPU >= ``CPU_PERCENT_MAX`` (95 %) of one core (process CPU time / wall time over the
  measured window): the single-threaded loop had no idle time left.

Event-loop pacing on Linux rounds timer waits up to whole milliseconds, so a healthy loop shows
0-1 ms of lag; the thresholds sit well above that.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from time import perf_counter
from typing import Any

from grid.metrics import percentile

DISPATCH_LAG_P99_MAX_S = 0.010
LOOP_LAG_P99_MAX_S = 0.005
CPU_PERCENT_MAX = 95.0
TICK_S = 0.005


class LoopLagMonitor:
    """Ticker task: every ``TICK_S`` it records how much later than asked it woke up."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._wall0 = 0.0
        self._cpu0 = 0.0
        self.wall_s = 0.0
        self.cpu_s = 0.0

    def start(self) -> None:
        self._wall0 = perf_counter()
        self._cpu0 = time.process_time()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        tick = self.tick_s
        lags = self.lags
        while True:
            t = perf_counter()
            await asyncio.sleep(tick)
            lags.append(max(0.0, perf_counter() - t - tick))

    async def stop(self) -> None:
        self.wall_s = perf_counter() - self._wall0
        self.cpu_s = time.process_time() - self._cpu0
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def verdict(
    dispatch_lags: Sequence[float],
    client_lags: Sequence[float],
    loop_lags: Sequence[float],
    cpu_percent: float,
) -> dict[str, Any]:
    """The self-check stats and the saturation verdict (see module doc for the thresholds).

    ``dispatch_lags``: sent_at - scheduled_at per request; ``client_lags``: the part not spent
    waiting for a concurrency-cap slot; ``loop_lags``: ticker oversleeps; ``cpu_percent``: of
    one core."""
    d50 = percentile(dispatch_lags, 50)
    d99 = percentile(dispatch_lags, 99)
    c99 = percentile(client_lags, 99)
    l50 = percentile(loop_lags, 50)
    l99 = percentile(loop_lags, 99)
    reasons: list[str] = []
    if c99 is not None and c99 > DISPATCH_LAG_P99_MAX_S:
        reasons.append(
            f"dispatch lag p99 {c99 * 1e3:.1f} ms > {DISPATCH_LAG_P99_MAX_S * 1e3:g} ms"
        )
    if l99 is not None and l99 > LOOP_LAG_P99_MAX_S:
        reasons.append(f"event-loop lag p99 {l99 * 1e3:.1f} ms > {LOOP_LAG_P99_MAX_S * 1e3:g} ms")
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
    }
