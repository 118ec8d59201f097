from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from actors.telemetry import NvmlSampler


def test_without_nvml_one_unavailable_row_and_no_crash():
    def missing():
        raise ImportError("No module named 'pynvml'")

    sampler = NvmlSampler(0.01, load_nvml=missing).start()
    rows = sampler.stop()
    assert len(rows) == 1
    assert rows[0]["metric"] == "unavailable" and rows[0]["gpu"] == -1
    assert "No module named" in rows[0]["note"] and rows[0]["value"] is None


def test_this_machine_without_a_driver_is_recorded_as_unavailable():
    # nvidia-ml-py is installed here but no NVML library/driver exists: the real init fails.
    pytest.importorskip("pynvml")
    sampler = NvmlSampler(0.01)
    if sampler.unavailable is None:
        pytest.skip("this machine has a working NVML")
    (row,) = sampler.start().stop()
    assert row["metric"] == "unavailable" and "NVML" in row["note"]


class _NotSupported(Exception):
    pass


def _fake_nvml(power: bool):
    """A stand-in for pynvml with two GPUs (unit test of the sampler alone)."""
    def power_usage(h):
        if not power:
            raise _NotSupported("Not Supported")
        return 250_000 + h  # milliwatts
    return SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=50 + h),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=(1024 + h) * 2**20),
        nvmlDeviceGetPowerUsage=power_usage, NVML_CLOCK_SM=1,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980)


def test_samples_every_gpu_and_metric_at_the_interval():
    sampler = NvmlSampler(0.05, load_nvml=lambda: _fake_nvml(power=True)).start()
    time.sleep(0.22)
    rows = sampler.stop()
    gpu1 = {r["metric"]: r["value"] for r in rows if r["gpu"] == 1}
    assert gpu1 == {"gpu_util_pct": 51.0, "memory_used_mib": 1025.0, "power_w": 250.001,
                    "sm_clock_mhz": 1980.0}
    times = sorted({r["sampled_at"] for r in rows})
    assert len(times) >= 4  # start, >= 2 ticks, stop


def test_unreadable_power_is_skipped_not_fatal():
    rows = NvmlSampler(10, load_nvml=lambda: _fake_nvml(power=False)).start().stop()
    assert {r["metric"] for r in rows} == {"gpu_util_pct", "memory_used_mib", "sm_clock_mhz"}
