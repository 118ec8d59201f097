"""LoadGenActor: a Ray actor around the asyncio load generator. The load runs in a thread of
its own on a fresh uvloop (about half the client CPU of Ray's plain asyncio loop at 256
streams, see bench/README_loadgen.md), so the actor's own loop stays free to answer. Per-token
data stays inside the actor; one batch of rows per cell crosses Ray."""

from __future__ import annotations

import asyncio

import ray

from actors.loadgen.runner import LoadResult, run_load_sync
from actors.loadgen.spec import LoadSpec


@ray.remote(max_restarts=0)
class LoadGenActor:
    async def run(self, spec: LoadSpec) -> LoadResult:
        return await asyncio.to_thread(run_load_sync, spec)

    async def ping(self) -> bool:
        return True
