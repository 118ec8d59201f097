"""The driver's own work on its node, in Ray workers there instead of the driver's thread, where
the run's controller advances every server group (grid/execute/steps.py: a call that blocks
the thread holds up every group). Each is called as a step with a bound:

- `ExternalProbe`: every HTTP call to a server someone else runs (its /health, what it offers,
  the cache flush, the /metrics sampling, the end of a cell), through actors/probe.py with
  the run's `ServerAccess`; one actor per server, from the driver's node, the network view
  the driver itself has.
- `kill_recorded`: a server process left on this host whose actor did not stop it
  (actors/_process.py `kill_recorded`: a grace period, then SIGKILL and a wait).

No CPU is reserved (num_cpus=0): they wait on the network or on other processes."""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import _process, probe
from engines.detect import Offers

KILL_TIMEOUT_S = 10.0
"""The most `kill_recorded` waits: its 5 s grace after SIGTERM, then up to 5 s for the killed
processes to be reaped (actors/_process.py `kill_recorded`, `kill_tree`)."""


def on_this_node() -> NodeAffinitySchedulingStrategy:
    """Scheduling on the calling process's node (the driver's), and only there."""
    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


@ray.remote(num_cpus=0, max_restarts=0)
class ExternalProbe:
    """The probes of one server someone else runs, at `url`, through `access`. A refused
    certificate raises `probe.TLSError` (one line) from every call but `end_cell`, which
    reports it."""

    def __init__(self, url: str, access: probe.ServerAccess) -> None:
        self.url, self.access = url, access
        self._sampler: probe.MetricsSampler | None = None

    def health(self) -> str | None:
        """None if /health answers 200 within its timeout (5 s), else why not."""
        return probe.health(self.url, self.access)

    def detect(self) -> Offers:
        """What the server offers (probe.detect: within probe.DETECT_TIMEOUT_S)."""
        return probe.detect(self.url, self.access)

    def flush_cache(self, timeout_s: float, path: str) -> None:
        """POST `path` until it is flushed (probe.flush_cache); ProbeError if it cannot be."""
        probe.flush_cache(self.url, self.access, timeout_s, path=path)

    def start_metrics(self, interval_s: float) -> None:
        """Scrape /metrics now (the state before the load), then every `interval_s`."""
        self._sampler = probe.MetricsSampler(self.url, self.access, interval_s).start()

    def end_cell(self, info_path: str | None, probe_timeout_s: float) -> dict[str, Any]:
        """Everything the end of a cell records, in one call: the /metrics samples taken
        during it (the last scrape now), why the server is down (`death`: its /health answer,
        or a refused certificate; None while it serves) and, while it serves, its server-info
        snapshot (`info_path`; {} without one). Each probe is bounded by `probe_timeout_s`,
        the sampler's stop by its own join (10 s) and scrape (5 s)."""
        sampler, self._sampler = self._sampler, None
        samples = sampler.stop() if sampler else []
        try:
            why = probe.health(self.url, self.access, timeout=probe_timeout_s)
            death = None if why is None else f"external server {self.url} {why}"
        except probe.ProbeError as e:
            death = str(e)
        info = {} if death or not info_path else dict(
            probe.get_json(self.url, info_path, self.access, timeout=probe_timeout_s))
        return {"samples": samples, "death": death, "info": info}


@ray.remote(num_cpus=0, max_retries=0)
def kill_recorded(pid: int, pgid: int, create_time: float | None) -> bool:
    """actors/_process.py `kill_recorded` where this task runs (send it to the server's
    node): whether anything was killed."""
    return _process.kill_recorded(pid, pgid, create_time)
