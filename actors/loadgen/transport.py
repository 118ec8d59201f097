"""httpx transports for the load generator: ``make_transport(name, ...)`` builds ``raw``
(:class:`StampingTransport`: HTTP/1.1 keep-alive connections, :class:`actors.loadgen.h1.
H1Connection`, whose every read is stamped and handed to the response's consumer inside
``data_received``), ``aiohttp`` or ``httpx``, all with the same TLS and keep-alive settings;
what each is, the connection handling of ``raw`` and why it is the default: docs/loadgen.md
("HTTP clients").

The response stream of ``raw`` (``response.extensions["specgrid_stream"]``, a
``StampedStream``) is read with ``async for`` (``stream.t``: the stamp of the chunk just
yielded) or ``await stream.consume(feed)`` (``feed(data, t)`` inside ``data_received``, one
wake-up at the end of the body). Pool: unlimited, per origin, last-in first-out; read timeouts
are lazy (one timer per wait, re-armed from the last read). The request is serialised once per
``httpx.Request`` object and cached in its extensions (the runner reuses request objects).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from time import perf_counter
from typing import Any

import httpx

from actors.loadgen.h1 import H1Connection

UNLIMITED_CONNECTIONS: dict[str, Any] = {"max_connections": None,
                                         "max_keepalive_connections": None}
AIOHTTP_READ_BUFSIZE = 4 * 1024 * 1024
"""aiohttp's 64 KiB default read buffer throttles long cumulative-text events (SGLang's own
client uses 10 MiB)."""
DEFAULT_KEEPALIVE_S = 60.0

Key = tuple[str, str, int]
Send = Callable[[httpx.Request], Awaitable[httpx.Response]]
"""Sends a request and returns its response once the head arrived
(``transport.handle_async_request``, or the send of a request already written)."""
Follow = Callable[[float, Callable[[httpx.Request], Send]], None]
"""``then(t, write)`` of :meth:`StampedStream.consume`."""


_FORBIDDEN_IN_HEADER = re.compile(rb"[\r\n\x00]")
"""Bytes a request header may not hold (RFC 9110 §5.5): httpx does not check them, and written
as they are they would split the header (header injection)."""
PRECONNECT_BATCH = 32
"""Connects in flight at once in ``StampingTransport.preconnect``."""


def _origin(url: httpx.URL) -> Key:
    scheme = url.scheme
    if scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}")
    return scheme, url.host, url.port or (443 if scheme == "https" else 80)


def ssl_context(verify: bool = True, ca_bundle: str | None = None) -> ssl.SSLContext:
    """Client TLS context: the system's (or ``ca_bundle``'s) roots with hostname checks, or,
    with ``verify=False``, no certificate check at all."""
    ctx = ssl.create_default_context(cafile=ca_bundle)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class StampedStream(httpx.AsyncByteStream):
    """Response body of a ``StampingTransport`` response. ``t`` is the ``perf_counter()`` stamp
    (taken in ``data_received``) of the chunk most recently yielded."""

    __slots__ = ("_conn", "_pool", "_read_timeout", "t", "_done", "t_sent", "_handed_on")

    def __init__(self, conn: H1Connection, pool: StampingTransport, read_timeout: float | None,
                 t_sent: float) -> None:
        self.t_sent = t_sent
        """``perf_counter()`` when the request left: just before taking a pooled connection
        (so a new connection's set-up counts) and writing the request."""
        self._conn = conn
        self._pool = pool
        self._read_timeout = read_timeout
        self.t = conn.t_first
        self._done = False
        self._handed_on = False
        """The connection went on to the next request (``consume``'s ``then``)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        q = conn._queue
        while True:
            while q:
                data, self.t = q.popleft()
                yield data
            if conn.error is not None:
                raise conn.error
            if conn.eof:
                break
            await self._wait_for_data()
        self._done = True

    async def consume(self, feed: Callable[[bytes, float], None],
                      then: Follow | None = None) -> None:
        """Call ``feed(data, t)`` for every read of the body, from inside ``data_received``;
        return at the end of the body. Raises the transport's error, ``httpx.ReadTimeout``, or
        whatever ``feed`` raised (the connection is then closed).

        ``then(t, write)``: called inside ``data_received`` the moment the body ended whole on
        a connection that can be reused (``t``: that read's stamp); it may call ``write(next)``
        to write the next request on this same connection right there, before any coroutine
        runs, and keep the send ``write`` returns to collect the answer with. A closed loop
        refills a slot this way in the read that freed it: a wave of requests that end
        together goes out in the same loop turn, instead of waiting for every finished
        request's coroutine to wake up, wind down and start the next one."""
        conn = self._conn
        q = conn._queue
        while q:  # bytes that arrived with the head
            data, t = q.popleft()
            feed(data, t)
        conn.sink = feed
        if then is not None:
            if conn.eof and conn.reusable:  # the whole body came with the head
                self._hand_on(then, conn.t_last)
            else:
                conn.on_end = lambda t: self._hand_on(then, t)
        try:
            while not self._handed_on and (not conn.eof or conn.error is not None):
                if conn.error is not None:
                    raise conn.error
                await self._wait_for_data()
        finally:
            if not self._handed_on:
                conn.sink = None
                conn.on_end = None
        self._done = True

    def _hand_on(self, then: Follow, t: float) -> None:
        conn = self._conn

        def write(request: httpx.Request) -> Send:
            self._handed_on = True
            self._done = True
            return self._pool._follow(conn, request)

        then(t, write)

    async def _wait_for_data(self) -> None:
        """Wait for the next read; silence longer than the read timeout closes the connection
        and raises httpx.ReadTimeout."""
        conn = self._conn
        try:
            await conn.wait(self._read_timeout)
        except TimeoutError:
            conn.error = httpx.ReadTimeout(f"no data for {self._read_timeout} s")
            conn.close()
            raise conn.error from None

    async def aclose(self) -> None:
        if not self._handed_on:  # else the connection carries the next request already
            self._pool._give_back(self._conn, self._done)


class StampingTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 keep-alive transport with per-read arrival stamps (see module doc)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None,
                 keepalive_s: float = DEFAULT_KEEPALIVE_S) -> None:
        self._idle: dict[Key, deque[H1Connection]] = {}
        self._all: set[H1Connection] = set()
        self._ssl = ssl_context
        self.keepalive_s = keepalive_s
        """Idle connections older than this are closed instead of reused."""

    # -- pool -------------------------------------------------------------------------------------
    def _give_back(self, conn: H1Connection, read_to_end: bool) -> None:
        if read_to_end and conn.reusable:
            conn.park()
            self._idle.setdefault(conn.key, deque()).append(conn)
        else:
            conn.close()
            self._all.discard(conn)

    def _take_idle(self, key: Key) -> H1Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = perf_counter()
        while idle and now - idle[0].idle_since > self.keepalive_s:  # oldest first
            self._drop(idle.popleft())
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
            self._drop(conn)
        return None

    def _drop(self, conn: H1Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def _connect(self, key: Key, timeout: float | None) -> H1Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ctx: ssl.SSLContext | None = None
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                _, proto = await loop.create_connection(
                    lambda: H1Connection(key), host, port, ssl=ctx,
                    server_hostname=host if ctx else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from None
        except OSError as exc:  # includes ssl.SSLCertVerificationError
            raise httpx.ConnectError(f"connect to {host}:{port}: {exc}") from exc
        self._all.add(proto)
        return proto

    async def preconnect(self, url: str, n: int, timeout: float | None = None) -> int:
        """Open connections to ``url``'s origin until ``n`` wait idle in the pool, at most
        ``PRECONNECT_BATCH`` connects in flight (a burst of hundreds overflows a server's
        listen backlog: dropped SYNs are retried after a second). Returns how many it opened
        (why: docs/loadgen.md, "Connections before the window")."""
        key = _origin(httpx.URL(url))
        idle = self._idle.setdefault(key, deque())
        for conn in [c for c in idle if c.closed]:
            idle.remove(conn)
            self._drop(conn)
        opened = 0
        while len(idle) < n:
            batch = min(n - len(idle), PRECONNECT_BATCH)
            conns = await asyncio.gather(*(self._connect(key, timeout) for _ in range(batch)))
            for conn in conns:
                conn.park()
                idle.append(conn)
            opened += batch
        return opened

    # -- requests -------------------------------------------------------------------------------
    @staticmethod
    async def _wire(request: httpx.Request) -> bytes:
        """The request's bytes, built once per Request object (the runner reuses them)."""
        payload: bytes | None = request.extensions.get("specgrid_wire")
        if payload is not None:
            return payload
        payload = _serialise(request, await request.aread())
        request.extensions["specgrid_wire"] = payload
        return payload

    @staticmethod
    def prepare(request: httpx.Request) -> None:
        """Serialise a request whose body is already read (bytes content) now, ahead of a
        load window, instead of on its first send inside it. A request that cannot be
        serialised is left as it is: its send fails it, as it would have."""
        if "specgrid_wire" not in request.extensions:
            try:
                request.extensions["specgrid_wire"] = _serialise(request, request.content)
            except (httpx.LocalProtocolError, httpx.RequestNotRead):
                pass

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        payload = await self._wire(request)
        return await self._answer(request, payload, perf_counter())

    async def _answer(self, request: httpx.Request, payload: bytes, t_sent: float,
                      written: H1Connection | None = None) -> httpx.Response:
        """Write ``payload`` on a pooled (or new) connection, or take ``written``, the
        connection it is already written on, and wait for the response head."""
        key = _origin(request.url)
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        head_only = request.method == "HEAD"
        for attempt in (0, 1):
            if written is not None and attempt == 0:
                conn, reused = written, True
            else:
                idle = self._take_idle(key)
                reused = idle is not None
                conn = idle if idle is not None else await self._connect(
                    key, timeouts.get("connect"))
                assert conn.transport is not None
                conn.begin(head_only)
                conn.transport.write(payload)
            try:
                while not conn.head_done:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(read_timeout)
            except TimeoutError:
                self._drop(conn)
                raise httpx.ReadTimeout(f"no response head within {read_timeout} s") from None
            except httpx.RemoteProtocolError:
                self._drop(conn)
                if reused and not conn.got_bytes and attempt == 0:
                    continue  # closed by the server while we wrote: retry once, new connection
                raise
            except BaseException:  # cancelled (request timeout): the connection is unusable
                self._drop(conn)
                raise
            break
        stream = StampedStream(conn, self, read_timeout, t_sent)
        return httpx.Response(
            status_code=conn.status,
            headers=conn.headers,
            stream=stream,
            request=request,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": conn.reason,
                "specgrid_stream": stream,
            },
        )

    def _follow(self, conn: H1Connection, request: httpx.Request) -> Send:
        """Write ``request`` on ``conn`` now (its previous response has just ended, inside
        ``data_received``) and return the send that waits for its answer."""
        payload: bytes | None = request.extensions.get("specgrid_wire")
        if payload is None:  # not prepared ahead (``prepare``): serialise it now
            self.prepare(request)
            payload = request.extensions.get("specgrid_wire")
        if payload is None:  # cannot be serialised: the ordinary send reports why
            conn.park()
            self._idle.setdefault(conn.key, deque()).append(conn)
            return self.handle_async_request
        t_sent = perf_counter()
        assert conn.transport is not None
        conn.begin(request.method == "HEAD")
        conn.transport.write(payload)

        async def send(req: httpx.Request) -> httpx.Response:
            return await self._answer(req, payload, t_sent, conn)

        return send

    async def aclose(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()


def _serialise(request: httpx.Request, body: bytes) -> bytes:
    """HTTP/1.1 bytes of ``request`` with ``body``."""
    chunked = False
    head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), request.url.raw_path)]
    for name, value in request.headers.raw:
        if _FORBIDDEN_IN_HEADER.search(name + value):  # would end the header early
            raise httpx.LocalProtocolError(
                f"invalid character in request header {name[:40]!r}")
        if name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        head.append(b"%s: %s\r\n" % (name, value))
    head.append(b"\r\n")
    if chunked:  # httpx announces chunked for a streamed body: frame it so
        body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    return b"".join(head) + body


def settings_error(name: str, tls_verify: bool = True, ca_bundle: str | None = None
                   ) -> str | None:
    """Why ``make_transport(name, ...)`` would fail or misbehave in the load generator, checked
    where the run is planned (before anything starts), or None: a ``ca_bundle`` that is not a
    PEM file of CA certificates (``ssl_context`` builds the same context the transport will);
    on ``aiohttp``, a proxy from the environment that aiohttp cannot use (it parses every
    proxy variable per request, so a malformed one fails every request, and it skips an
    ``https://`` proxy with a warning, sending the requests direct). The proxies are read from
    this process's environment, which a local cluster's load generators inherit."""
    if ca_bundle is not None:
        try:
            ssl_context(tls_verify, ca_bundle)
        except (ssl.SSLError, OSError, ValueError) as exc:
            why = getattr(exc, "reason", None) or exc
            return f"load.ca_bundle={ca_bundle} is not a PEM file of CA certificates ({why})"
    if name == "aiohttp":
        from urllib.request import getproxies_environment

        from yarl import URL

        proxies = getproxies_environment()  # what aiohttp reads (urllib.request.getproxies)
        for scheme in ("http", "https", "ws", "wss"):  # aiohttp.helpers.proxies_from_env
            value = proxies.get(scheme)
            if value is None:
                continue
            var = f"{scheme.upper()}_PROXY"
            try:
                url = URL(value)
            except ValueError as exc:
                return f"load.transport=aiohttp: {var}={value!r} is not a URL ({exc})"
            if scheme in ("http", "https") and (url.scheme != "http" or not url.host):
                return (f"load.transport=aiohttp: {var}={value!r} is not an http://host:port "
                        "proxy (aiohttp uses http:// proxies only)")
    return None


def make_transport(
    name: str,
    *,
    tls_verify: bool = True,
    ca_bundle: str | None = None,
    keepalive_s: float = DEFAULT_KEEPALIVE_S,
) -> httpx.AsyncBaseTransport:
    """Build the named transport (``raw`` | ``aiohttp`` | ``httpx``) with an unlimited pool and
    the given TLS and keep-alive settings."""
    ctx = ssl_context(tls_verify, ca_bundle)
    limits = httpx.Limits(**UNLIMITED_CONNECTIONS, keepalive_expiry=keepalive_s)
    if name == "raw":
        return StampingTransport(ssl_context=ctx, keepalive_s=keepalive_s)
    if name == "httpx":
        return httpx.AsyncHTTPTransport(verify=ctx, limits=limits)
    if name == "aiohttp":
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:
            # limit=0: unlimited. AiohttpTransport's own connector falls back to aiohttp's
            # default of 100 connections when httpx.Limits(max_connections=None) is passed.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=ctx,
                                             keepalive_timeout=keepalive_s)
            # trust_env: proxies from HTTP_PROXY/HTTPS_PROXY/NO_PROXY (and .netrc)
            return aiohttp.ClientSession(connector=connector, trust_env=True,
                                         read_bufsize=AIOHTTP_READ_BUFSIZE)

        return AiohttpTransport(verify=ctx, limits=limits, client=session)
    raise ValueError(f"unknown transport {name!r}; choose raw, aiohttp or httpx")
