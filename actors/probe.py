"""Talking to a server beside the load: flush its cache, read /server_info, sample /metrics.

Plain functions over httpx (no Ray), used by the ServerActor on the server's own node (the
server listens on 127.0.0.1 there, so a driver on another node could not reach it) and, for an
external server, by its ExternalProbe actor on the driver's node (actors/driver_node.py). Every
call goes through one `ServerAccess`: how to talk to that server (TLS verification, a CA
bundle, its Authorization header), the same settings the load generators use
(`load.tls_verify`, `load.ca_bundle`, `engine.api_key`). A certificate the client refuses is a
`TLSError` at once (one line naming the URL, the reason and the settings that change it),
never a quiet failed probe or a wait until a timeout."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from actors.loadgen.transport import ssl_context
from engines.detect import FLUSH_CANDIDATES, INFO_CANDIDATES, MISSING, Offers, decide

GET_TIMEOUT_S = 10.0
"""How long a GET of a document (/metrics when detecting, /version, /v1/models, server info)
waits for the server."""
FLUSH_REQUEST_TIMEOUT_S = 30.0
"""How long one cache-flush POST waits (SGLang flushes once its running requests drained)."""
DETECT_TIMEOUT_S = (GET_TIMEOUT_S * (3 + len(INFO_CANDIDATES))
                    + FLUSH_REQUEST_TIMEOUT_S * len(FLUSH_CANDIDATES))
"""The most `detect` waits: /metrics, /version, /v1/models and every candidate endpoint tried,
each up to its timeout (110 s)."""


class ProbeError(RuntimeError):
    """The server did not answer as a healthy SGLang server does."""


class TLSError(ProbeError):
    """The server's certificate was refused: retrying cannot help."""


@lru_cache(maxsize=8)
def _context(verify: bool, ca_bundle: str | None) -> ssl.SSLContext:
    return ssl_context(verify, ca_bundle)  # loading the roots takes ms: once per setting


@dataclass(frozen=True)
class ServerAccess:
    """How to talk to one server: verify its certificate or not, against which CA bundle
    (None: the system's roots), and the Bearer token sent with every request. Plain data (it
    travels to a ServerActor through Ray); the TLS context is built where it is used, and only
    for an https URL (a launched server is plain http on its node, where a driver-side CA
    bundle path need not exist)."""

    tls_verify: bool = True
    ca_bundle: str | None = None
    api_key: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], api_key: str | None = None
                    ) -> ServerAccess:
        """From a cell's config: `load.tls_verify`, `load.ca_bundle` and `api_key` (default
        `engine.api_key`; a launched server's may be the run's generated key)."""
        load = config.get("load") or {}
        return cls(tls_verify=bool(load.get("tls_verify", True)),
                   ca_bundle=load.get("ca_bundle"),
                   api_key=api_key if api_key is not None
                   else (config.get("engine") or {}).get("api_key"))

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client_options(self, url: str) -> dict[str, Any]:
        """The keyword arguments of `httpx.Client` (or `httpx.get`) for a request to `url`."""
        options: dict[str, Any] = {"headers": self.headers}
        if url.startswith("https:"):
            options["verify"] = _context(self.tls_verify, self.ca_bundle)
        return options

    def client(self, url: str, timeout: float | httpx.Timeout) -> httpx.Client:
        return httpx.Client(timeout=timeout, **self.client_options(url))

    def request(self, method: str, url: str, timeout: float) -> httpx.Response:
        """One request; TLSError if the certificate is refused, other httpx errors as they
        are."""
        with self.client(url, timeout) as client:
            return checked(url, lambda: client.request(method, url))


def certificate_error(url: str, error: BaseException) -> str | None:
    """The one line for a refused certificate if `error` (an httpx.ConnectError, through its
    causes) is one, else None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            reason = seen.verify_message or seen.reason or str(seen)
            origin = httpx.URL(url)
            where = f"{origin.scheme}://{origin.host}" + (f":{origin.port}" if origin.port
                                                          else "")
            return (f"TLS: certificate verify failed for {where}: {reason} "
                    "(load.tls_verify=false or load.ca_bundle=<the CA that signed it>)")
        seen = seen.__cause__ or seen.__context__
    return None


def checked(url: str, call: Any) -> Any:
    """`call()`, with a refused certificate raised as TLSError."""
    try:
        return call()
    except httpx.ConnectError as e:
        message = certificate_error(url, e)
        if message is not None:
            raise TLSError(message) from None
        raise


def flush_cache(url: str, access: ServerAccess, timeout_s: float = 60.0,
                path: str = "/flush_cache") -> None:
    """POST `path` (SGLang's /flush_cache, vLLM's /reset_prefix_cache). SGLang answers 400
    while requests still run, so a 400 is retried until drained (at most `timeout_s`); 404 and
    405 are definite answers (no such endpoint): ProbeError at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            response = access.request("POST", f"{url}{path}", timeout=FLUSH_REQUEST_TIMEOUT_S)
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


def health(url: str, access: ServerAccess, path: str = "/health", timeout: float = 5.0
           ) -> str | None:
    """None if GET `path` answers 200, else why not (one line). TLSError at once for a refused
    certificate."""
    try:
        code = access.request("GET", f"{url}{path}", timeout=timeout).status_code
    except httpx.HTTPError as e:
        return f"does not answer: {e!r}"
    return None if code == 200 else f"is not healthy ({path} answered {code})"


def detect(url: str, access: ServerAccess) -> Offers:
    """Ask a server someone else runs, once, what it offers (engines/detect.py): its
    /metrics names, which cache-flush endpoint answers (trying each in turn: a POST that
    flushes, before any cell runs), which server-info endpoint, its version, and who serves
    its models (/v1/models `owned_by`: `sglang`, `vllm`)."""
    names = [name for name, _, _ in parse_prometheus(_get_text(url, "/metrics", access))]
    flush: dict[str, int] = {}
    for path in FLUSH_CANDIDATES:
        flush[path] = _status(access, "POST", f"{url}{path}", FLUSH_REQUEST_TIMEOUT_S)
        if flush[path] not in MISSING:
            break
    info: dict[str, int] = {}
    for path in INFO_CANDIDATES:
        info[path] = _status(access, "GET", f"{url}{path}", GET_TIMEOUT_S)
        if info[path] == 200:
            break
    version = get_json(url, "/version", access).get("version")
    models = get_json(url, "/v1/models", access).get("data") or [{}]
    owner = models[0].get("owned_by") if isinstance(models[0], dict) else None
    return decide(names, flush, info, str(version) if version else None,
                  str(owner) if owner else None)


def _status(access: ServerAccess, method: str, url: str, timeout: float) -> int:
    try:
        return int(access.request(method, url, timeout).status_code)
    except httpx.HTTPError:
        return 0


def _get_text(url: str, path: str, access: ServerAccess) -> str:
    try:
        response = access.request("GET", f"{url}{path}", timeout=GET_TIMEOUT_S)
        return response.text if response.status_code == 200 else ""
    except httpx.HTTPError:
        return ""


def get_json(url: str, path: str, access: ServerAccess, timeout: float = GET_TIMEOUT_S
             ) -> dict[str, Any]:
    """GET a JSON document; {} if the server has none there or does not answer within
    `timeout` (TLSError if its certificate is refused)."""
    try:
        response = access.request("GET", f"{url}{path}", timeout=timeout)
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
    """Scrapes /metrics every `interval_s` in a thread while a cell's load runs, over one
    keep-alive client. Servers without /metrics (404) give no samples; a refused certificate
    fails `start` (TLSError) and is a failed scrape after that."""

    def __init__(self, url: str, access: ServerAccess, interval_s: float) -> None:
        self.url, self.interval_s = url, interval_s
        self.samples: list[tuple[float, str, dict[str, str], float]] = []
        self._client = access.client(url, timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> MetricsSampler:
        try:
            self.scrape()  # the state before the load
        except TLSError:
            self._client.close()
            raise
        self._thread.start()
        return self

    def halt(self) -> None:
        """Start no new scrape (one in flight ends within the client's 5 s timeout)."""
        self._stop.set()

    def stop(self, scrape: bool = True) -> list[tuple[float, str, dict[str, str], float]]:
        """The samples, with a last scrape (the state after the load) when `scrape`."""
        self.halt()
        self._thread.join(timeout=10)
        try:
            if scrape:
                self.scrape()
        except TLSError:
            pass
        self._client.close()
        return self.samples

    def scrape(self) -> None:
        """One scrape; TLSError if the certificate is refused."""
        url = f"{self.url}/metrics"
        try:
            response = checked(url, lambda: self._client.get(url))
        except httpx.HTTPError:
            return
        if response.status_code != 200:
            return
        now = time.time()
        self.samples += [(now, name, labels, value)
                         for name, labels, value in parse_prometheus(response.text)]

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.scrape()
            except TLSError:
                pass
