"""LoadGenActor: a Ray actor around the asyncio load generator.

The load runs on an event loop of its own (uvloop when installed: about half the client CPU of
Ray's plain asyncio loop at 256 streams, bench/README_loadgen.md) in a thread of its own, so the
actor's loop stays free to answer. Per-token data stays inside the actor; one batch of rows per
cell crosses Ray. ``prepare`` (a ``LoadSpec`` or a ``ConversationLoadSpec``: requests built,
connections opened, warm-up run) then ``run(start_at)`` (the measured window; it closes the
connections); ``cancel`` ends a cell's load at once with ``LoadCancelled``, and the actor runs
the group's next cell. The start barrier and the cancel: docs/loadgen.md ("One cell, several
clients: the start barrier").
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

import ray

from actors.loadgen.conversation import ConversationRun
from actors.loadgen.conversation_plan import ConversationLoadSpec
from actors.loadgen.runner import LoadRun, new_event_loop_runner
from actors.loadgen.spec import LoadResult, LoadSpec
from actors.loadgen.tally import Tally

START_MARGIN_S = 0.5
"""Lead time of a shared start after the barrier: covers the ``run`` calls reaching every actor
(a few ms on an idle node, 100s of ms on a busy one); a client reached later re-anchors
(``start_late_s``)."""

CANCEL_GRACE_S = 5.0
"""How long ``cancel`` waits for the load's cancelled tasks to end (each ends at its next
await, closing its stream; a task that ignores its cancellation is left after this)."""

T = TypeVar("T")


class LoadCancelled(RuntimeError):
    """The cell's load was cancelled (``LoadGenActor.cancel``) before it ended."""


class Load(Protocol):
    """One client's share of one cell, prompt or conversation load alike."""

    tally: Tally
    """Live counts of its requests (rounds), read from the actor's own loop."""

    async def prepare(self) -> dict[str, Any]: ...
    async def measure(self, start_at: float | None) -> LoadResult: ...
    async def aclose(self) -> None: ...


class LoopThread:
    """An event loop (uvloop when installed) running forever in a daemon thread."""

    def __init__(self) -> None:
        ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[Any] | None = None

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            self._stop = asyncio.Event()
            ready.set()
            await self._stop.wait()

        self._thread = threading.Thread(target=new_event_loop_runner(), args=(main(),),
                                        name="loadgen-loop", daemon=True)
        self._thread.start()
        ready.wait()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the thread's loop; await its result from another loop."""
        assert self.loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def cancel_all(self, grace_s: float) -> int:
        """Cancel every task on the thread's loop but its own (what a load started there) and
        wait up to ``grace_s`` for them to end; how many were cancelled."""

        async def cancel() -> int:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me and t is not self._main]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=grace_s)
            return len(tasks)

        return await self.call(cancel())

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=5)


def open_load(spec: LoadSpec | ConversationLoadSpec) -> Load:
    """The client's share of a cell: prompts (runner.py) or conversations (conversation.py)."""
    return LoadRun(spec) if isinstance(spec, LoadSpec) else ConversationRun(spec)


@ray.remote(max_restarts=0)
class LoadGenActor:
    def __init__(self) -> None:
        self._loop = LoopThread()
        self._load: Load | None = None
        self._live: Tally | None = None
        """The counts of the cell being prepared or run (None between cells)."""

    async def prepare(self, spec: LoadSpec | ConversationLoadSpec) -> dict[str, Any]:
        """Connect (and warm up, for prompts) for one cell (see the module doc)."""
        await self.close()

        async def go() -> dict[str, Any]:
            self._load = open_load(spec)
            self._live = self._load.tally  # the warm-up's progress counts too
            return await self._load.prepare()

        return await self._cancellable(go())

    async def run(self, start_at: float | None) -> LoadResult:
        """The measured window of the prepared cell, from ``start_at`` (epoch s)."""
        if self._load is None:
            raise RuntimeError("run() without prepare()")
        load, self._load = self._load, None

        async def go() -> LoadResult:
            try:
                return await load.measure(start_at)
            finally:
                await load.aclose()

        self._live = load.tally
        try:
            return await self._cancellable(go())
        finally:
            self._live = None

    async def _cancellable(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro`` on the load's loop; LoadCancelled when ``cancel`` ended it there."""
        try:
            return await self._loop.call(coro)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # this call itself was cancelled
                raise
            raise LoadCancelled("the cell's load was cancelled") from None

    async def cancel(self) -> int:
        """End the cell's load now (see the module doc): the requests it had in flight
        (cancelled, their connections closed); 0 between cells."""
        live, self._live = self._live, None
        in_flight = live.in_flight() if live is not None else 0
        await self._loop.cancel_all(CANCEL_GRACE_S)
        await self.close()  # a load prepared or being prepared: its connections
        return in_flight

    async def progress(self) -> dict[str, int] | None:
        """The cell's counts (actors/loadgen/tally.py): measured requests (conversation rounds)
        done, their output tokens and errors, and the activity (chunks and completions, warm-up
        included) of the cell being prepared or run; None between cells. The actor's own loop
        answers while the load runs on its thread."""
        live = self._live
        return live.progress() if live is not None else None

    async def close(self) -> None:
        """Close a prepared cell that will not run."""
        self._live = None
        if self._load is not None:
            load, self._load = self._load, None
            await self._loop.call(load.aclose())

    async def ping(self) -> bool:
        return True
