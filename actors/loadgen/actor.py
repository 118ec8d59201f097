"""LoadGenActor: a Ray actor around the asyncio load generator. Per-token data stays inside the
actor; one batch of rows per cell crosses Ray."""

from __future__ import annotations

import ray

from actors.loadgen.runner import LoadResult, run_load
from actors.loadgen.spec import LoadSpec


@ray.remote(max_restarts=0)
class LoadGenActor:
    async def run(self, spec: LoadSpec) -> LoadResult:
        return await run_load(spec)

    async def ping(self) -> bool:
        return True
