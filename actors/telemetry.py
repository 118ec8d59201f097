"""GPU telemetry during a cell: utilisation, memory used, power and SM clock of every GPU of a
node, read through NVML (nvidia-ml-py) once a second by a thread, returned as long-format rows
(grid/store/schema.py TELEMETRY_FIELDS without the run/cell identity, which the driver adds).

Without NVML (no driver, no GPU: this machine, the simulator) the sampler records one
`unavailable` row with the reason and samples nothing; a metric a GPU does not support (power
on some boards) is skipped for that GPU. Nothing here raises into the cell.

`NvmlSampler` is plain Python (testable without Ray); `TelemetryActor` is the Ray actor the
driver starts once per node."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import ray

Row = dict[str, Any]


def _load_nvml() -> ModuleType:
    import pynvml  # nvidia-ml-py

    return pynvml


class NvmlSampler:
    """Samples every GPU of this node every `interval_s` between start() and stop()."""

    METRICS: tuple[tuple[str, Callable[[Any, Any], float]], ...] = (
        ("gpu_util_pct", lambda nvml, h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
        ("memory_used_mib", lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).used / 2**20),
        ("power_w", lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
        ("sm_clock_mhz",
         lambda nvml, h: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))),
    )

    def __init__(self, interval_s: float = 1.0,
                 load_nvml: Callable[[], ModuleType] = _load_nvml) -> None:
        self.interval_s = interval_s
        self.node = socket.gethostname()
        self.rows: list[Row] = []
        self.unavailable: str | None = None
        self._nvml: Any = None
        self._handles: list[tuple[int, Any]] = []
        self._unsupported: set[tuple[int, str]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            nvml = load_nvml()
            nvml.nvmlInit()
            self._handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i))
                             for i in range(nvml.nvmlDeviceGetCount())]
            self._nvml = nvml
        except Exception as e:  # ImportError, NVMLError_LibraryNotFound, driver errors
            self.unavailable = f"NVML unavailable: {e or type(e).__name__}"

    def start(self) -> NvmlSampler:
        self.rows, self._stop = [], threading.Event()
        if self._nvml is None:
            return self
        self.sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Row]:
        """The rows since start(); one `unavailable` row without NVML."""
        if self._nvml is None:
            return [{"node": self.node, "gpu": -1, "sampled_at": time.time(),
                     "metric": "unavailable", "value": None, "note": self.unavailable}]
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample()
        return self.rows

    def sample(self) -> None:
        now = time.time()
        for index, handle in self._handles:
            for name, read in self.METRICS:
                if (index, name) in self._unsupported:
                    continue
                try:
                    value = read(self._nvml, handle)
                except Exception:  # NVMLError_NotSupported and friends: skip this metric
                    self._unsupported.add((index, name))
                    continue
                self.rows.append({"node": self.node, "gpu": index, "sampled_at": now,
                                  "metric": name, "value": value, "note": None})

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()


@ray.remote(num_cpus=0, max_restarts=0)
class TelemetryActor:
    """One per node: start() before a cell's load, stop() after it returns the rows."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.sampler = NvmlSampler(interval_s)

    def start(self) -> str | None:
        """Starts sampling; returns why NVML is unavailable (None when it is)."""
        self.sampler.start()
        return self.sampler.unavailable

    def stop(self) -> list[Row]:
        return self.sampler.stop()
