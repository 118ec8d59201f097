"""The real-time loop that drives a ``BatchCore`` (engines/sim/scheduler.py) on the event loop:
it sleeps each step's duration (times ``--sim-time-scale``) against absolute deadlines, so timer
granularity does not accumulate, wakes the HTTP handlers whose requests got tokens, and writes
SGLang's "Decode batch" / "Prefill batch" log lines."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from engines.sim.scheduler import BatchCore, SimRequest, Step

log = logging.getLogger("engines.sim")


class SchedulerLoop:
    """Runs a ``BatchCore`` in real time on the event loop and wakes waiting HTTP handlers."""

    MAX_LAG_S = 0.05
    """When the loop falls this far behind its deadlines, it re-anchors (and counts a lag)."""

    def __init__(
        self,
        core: BatchCore,
        time_scale: float = 1.0,
        decode_log_interval: int = 40,
        on_decode_log: Callable[[str], None] | None = None,
    ) -> None:
        self.core = core
        self.time_scale = time_scale
        self.decode_log_interval = max(1, decode_log_interval)
        self.on_decode_log = on_decode_log or log.info
        self.hung = False
        self.last_output_at = 0.0
        """time.monotonic() of the last committed step (the health check's heartbeat)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._win_t = time.monotonic()
        self._win_tokens = 0
        self._last_log = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-scheduler")
        self._task.add_done_callback(self._died)

    @staticmethod
    def _died(task: asyncio.Task[None]) -> None:
        """A scheduler that stops by an error would leave a silent, wedged server: exit loudly."""
        if not task.cancelled() and task.exception() is not None:
            log.error("scheduler loop failed", exc_info=task.exception())
            logging.shutdown()
            os._exit(70)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, req: SimRequest) -> None:
        self.core.submit(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        self.core.abort(req)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        core = self.core
        deadline = loop.time()
        while True:
            if self.hung:
                await loop.create_future()  # never resolves: a hung server
            step = core.plan()
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            deadline += step.duration_s * self.time_scale
            delay = deadline - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                if delay < -self.MAX_LAG_S:
                    core.stats.lag_events += 1
                    deadline = loop.time()
                await asyncio.sleep(0)
            if self.hung:
                continue
            # time.monotonic(), the clock of SimRequest.arrival (uvloop's loop.time() is a
            # cached millisecond clock that can lag behind it)
            touched = core.commit(step, time.monotonic())
            self.last_output_at = time.monotonic()
            for r in touched:
                w = r.waiter
                if w is not None and not w.done():
                    w.set_result(None)
            if step.kind == "decode":
                self._window(step, touched)
            elif step.kind == "prefill":
                self._log_prefill(step)

    def _window(self, step: Step, touched: list[SimRequest]) -> None:
        st = self.core.stats
        self._win_tokens += sum(step.accepts) if step.accepts is not None else len(touched)
        if st.decode_steps % self.decode_log_interval:
            return
        st.roll_window()
        now = time.monotonic()
        elapsed = now - self._win_t
        if elapsed > 0:
            st.last_gen_throughput = self._win_tokens / elapsed
        self._win_t, self._win_tokens = now, 0
        if now - self._last_log < 0.1:  # SGLang logs every N steps; cap the rate at time-scale 0
            return
        self._last_log = now
        core = self.core
        msg = (f"Decode batch. #running-req: {len(core.running)}, #token: {core.kv_used}, "
               f"token usage: {core.kv_used / core.max_total_tokens:.2f}, ")
        if core.spec is not None:
            msg += (f"accept len: {st.recent_accept_length:.2f}, "
                    f"accept rate: {st.avg_spec_accept_rate:.2f}, ")
        msg += (f"cuda graph: {core.model.cuda_graph}, gen throughput (token/s): "
                f"{st.last_gen_throughput:.2f}, #queue-req: {len(core.waiting)}")
        self.on_decode_log(msg)

    def _log_prefill(self, step: Step) -> None:
        now = time.monotonic()
        if now - self._last_log < 0.1:
            return
        self._last_log = now
        core = self.core
        self.on_decode_log(
            f"Prefill batch. #new-seq: {len(step.reqs)}, #new-token: {step.tokens}, "
            f"#cached-token: {step.cached}, "
            f"token usage: {core.kv_used / core.max_total_tokens:.2f}, "
            f"#running-req: {max(0, len(core.running) - len(step.reqs))}, "
            f"#queue-req: {len(core.waiting)}"
        )
