"""Talking to a server beside the load: flush its cache, read /server_info, sample /metrics.

Plain functions over httpx (no Ray), used by the ServerActor on the server's own node (the
server listens on 127.0.0.1 there, so a driver on another node could not reach it) and by the
driver directly for an external server."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engines.external.detect import FLUSH_CANDIDATES, INFO_CANDIDATES, MISSING, Offers, decide


class ProbeError(RuntimeError):
    """The server did not answer as a healthy SGLang server does."""


def flush_cache(url: str, headers: Mapping[str, str], timeout_s: float = 60.0,
                path: str = "/flush_cache") -> None:
    """POST `path` (SGLang's /flush_cache, vLLM's /reset_prefix_cache). SGLang answers 400
    while requests still run, so a 400 is retried until drained (at most `timeout_s`); 404 and
    405 are definite answers (no such endpoint): ProbeError at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            response = httpx.post(f"{url}{path}", timeout=30, headers=dict(headers))
        except httpx.HTTPError as e:
            raise ProbeError(f"{path} failed: {e!r}") from None
        if response.status_code == 200:
            return
        if response.status_code in (404, 405):
            raise ProbeError(f"{path} answered {response.status_code}: the server has no such "
                             "endpoint")
        if time.monotonic() > deadline:
            raise ProbeError(f"{path} still {response.status_code} after {timeout_s} s")
        time.sleep(0.2)


def detect(url: str, headers: Mapping[str, str]) -> Offers:
    """Ask a server someone else runs, once, what it offers (engines/external/detect.py): its
    /metrics names, which cache-flush endpoint answers (trying each in turn: a POST that
    flushes, before any cell runs), which server-info endpoint, and its version."""
    names = [name for name, _, _ in parse_prometheus(_get_text(url, "/metrics", headers))]
    flush: dict[str, int] = {}
    for path in FLUSH_CANDIDATES:
        flush[path] = _status(lambda p=path: httpx.post(f"{url}{p}", timeout=30,
                                                        headers=dict(headers)))
        if flush[path] not in MISSING:
            break
    info: dict[str, int] = {}
    for path in INFO_CANDIDATES:
        info[path] = _status(lambda p=path: httpx.get(f"{url}{p}", timeout=10,
                                                      headers=dict(headers)))
        if info[path] == 200:
            break
    version = get_json(url, "/version", headers).get("version")
    return decide(names, flush, info, str(version) if version else None)


def _status(call: Any) -> int:
    try:
        return int(call().status_code)
    except httpx.HTTPError:
        return 0


def _get_text(url: str, path: str, headers: Mapping[str, str]) -> str:
    try:
        response = httpx.get(f"{url}{path}", timeout=10, headers=dict(headers))
        return response.text if response.status_code == 200 else ""
    except httpx.HTTPError:
        return ""


def get_json(url: str, path: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """GET a JSON document; {} if the server has none there."""
    try:
        response = httpx.get(f"{url}{path}", timeout=10, headers=dict(headers))
        return response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}


def parse_prometheus(text: str, buckets: bool = False
                     ) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition, parsed by prometheus_client's own parser:
    (sample name, labels, value). Histogram buckets are left out unless `buckets` (their _sum
    and _count stay: one cell would otherwise carry hundreds of rows per scrape), and so are
    `_created` timestamps. A malformed exposition gives no samples (a failed scrape), never a
    crash."""
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith("_created") or (
                        not buckets and sample.name.endswith("_bucket")):
                    continue
                samples.append((sample.name, dict(sample.labels), float(sample.value)))
    except ValueError:
        return []
    return samples


class MetricsSampler:
    """Scrapes /metrics every `interval_s` in a thread while a cell's load runs. Servers
    without /metrics (404) give no samples."""

    def __init__(self, url: str, headers: Mapping[str, str], interval_s: float) -> None:
        self.url, self.headers, self.interval_s = url, dict(headers), interval_s
        self.samples: list[tuple[float, str, dict[str, str], float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> MetricsSampler:
        self.scrape()  # the state before the load
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, str, dict[str, str], float]]:
        self._stop.set()
        self._thread.join(timeout=10)
        self.scrape()  # the state after the load
        return self.samples

    def scrape(self) -> None:
        try:
            response = httpx.get(f"{self.url}/metrics", timeout=5, headers=self.headers)
        except httpx.HTTPError:
            return
        if response.status_code != 200:
            return
        now = time.time()
        self.samples += [(now, name, labels, value)
                         for name, labels, value in parse_prometheus(response.text)]

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape()
