"""LoadGenActor: a Ray actor around the asyncio load generator.

The load runs on an event loop of its own (uvloop when installed: about half the client CPU of
Ray's plain asyncio loop at 256 streams, bench/README_loadgen.md) in a thread of its own, so the
actor's loop stays free to answer. Per-token data stays inside the actor; one batch of rows per
cell crosses Ray.

How the driver runs one cell on N actors (the barrier that keeps the clients of a cell from
starting while others still warm up)::

    ray.get([a.prepare.remote(spec_i) for a, spec_i in zip(actors, specs)])  # all warmed up
    start_at = time.time() + START_MARGIN_S                                  # one shared origin
    results = ray.get([a.run.remote(start_at) for a in actors])              # LoadResult each

``prepare`` takes a prompt load (``LoadSpec``) or a conversation load
(``ConversationLoadSpec``) alike: it builds the requests, opens connections and runs the
client's warm-up requests (all completed; a conversation load has none). ``run`` waits until
``start_at`` (epoch s) and runs the measured window; a ``start_at`` already past when ``run``
starts re-anchors at that moment (no backlog of arrivals fired at once;
``stats["start_late_s"]`` says by how much). ``run`` closes the connections; a
``prepare`` not followed by ``run`` is closed by the next ``prepare`` or ``close``.
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

T = TypeVar("T")


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

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
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

        return await self._loop.call(go())

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
            return await self._loop.call(go())
        finally:
            self._live = None

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
