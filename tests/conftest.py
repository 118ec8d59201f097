"""Shared fixtures: one real Ray instance for the whole test session (Ray starts in ~10 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, num_gpus=8, include_dashboard=False,
                 object_store_memory=80 * 2**20, log_to_driver=False)
    yield ray
    ray.shutdown()
