"""httpx transports for the load generator.

``StampingTransport`` is a minimal HTTP/1.1 client transport on ``asyncio.Protocol``: an
unlimited keep-alive pool per origin, ``Content-Length``/chunked/until-close bodies, and, the
point of it, a ``time.perf_counter()`` stamp taken in ``data_received`` for every read.

Its response stream (``response.extensions["specgrid_stream"]``, a ``StampedStream``) offers two
ways to read a body:

* ``async for`` (standard httpx): each chunk is queued with its stamp; ``stream.t`` is the stamp
  of the chunk just yielded;
* ``await stream.consume(feed)``: ``feed(data, t)`` is called *inside* ``data_received`` for
  every read, and the awaiting coroutine wakes once, at the end of the body (or on an error,
  including an exception raised by ``feed``). No task wake-up per read: the per-read cost drops
  to the parse itself, and every read is parsed at the moment it is stamped, so arrival times
  stay precise when hundreds of streams are readable in the same event-loop iteration.

Read timeouts are lazy (one timer per wait, re-armed from the time of the last read), so there is
no timer work per read. Scope: ``http://`` and ``https://`` origins, no proxies, no HTTP/2; the
request body is sent in one write (serialised once per ``httpx.Request`` object and cached in its
extensions, as the runner reuses request objects).

``make_transport(name, ...)`` builds one of ``raw`` | ``aiohttp`` | ``httpcore``.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from time import perf_counter
from typing import Any

import httpx

_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?\r\n").match
UNLIMITED = httpx.Limits(max_connections=None, max_keepalive_connections=None)
AIOHTTP_READ_BUFSIZE = 4 * 1024 * 1024
"""aiohttp's 64 KiB default read buffer throttles long cumulative-text events (SGLang's own
client uses 10 MiB)."""


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection; one request/response at a time."""

    __slots__ = (
        "transport", "closed", "error", "_buf", "_state", "status", "reason",
        "headers", "keep_alive", "_remaining", "_chunked", "_until_close", "_queue", "_waiter",
        "_eof", "got_bytes", "t_first", "t_last", "key", "sink", "_timer",
    )

    def __init__(self, key: tuple[str, str, int] = ("", "", 0)) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: Exception | None = None
        self._buf = b""
        self._state = 0  # 0 idle/head, 1 body, 2 done
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.keep_alive = True
        self._remaining = 0
        self._chunked = False
        self._until_close = False
        self._queue: deque[tuple[bytes, float]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self.got_bytes = False
        self.t_first = 0.0
        self.t_last = 0.0
        self.sink: Callable[[bytes, float], None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == 1 and self._until_close:
            self._eof = True
        elif self._state != 2 and self.error is None:
            self.error = httpx.RemoteProtocolError(
                "server closed the connection"
                + (" before the response ended" if self.got_bytes else " without a response")
            )
        self._wake()

    def data_received(self, data: bytes) -> None:
        t = perf_counter()
        self.t_last = t
        if not self.got_bytes:
            self.got_bytes = True
            self.t_first = t
        state = self._state
        if state == 1 and not self._buf:
            self._body(data, t)
        else:
            self._buf += data
            if state == 0:
                self._head(t)
            elif state == 1:
                data, self._buf = self._buf, b""
                self._body(data, t)
        # wake the reader: per read while waiting for the head or in queue mode; in sink mode
        # only at the end of the body or on an error
        if self._waiter is not None and (
            self.sink is None or self._eof or self.error is not None
        ):
            self._wake()

    def eof_received(self) -> bool | None:
        return False

    # -- parsing ------------------------------------------------------------------------------
    def _fail(self, msg: str) -> None:
        self.error = httpx.RemoteProtocolError(msg)
        if self.transport is not None:
            self.transport.close()

    def _head(self, t: float) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > 65536:
                self._fail("response head too large")
            return
        lines = self._buf[:end].split(b"\r\n")
        rest = self._buf[end + 4 :]
        self._buf = b""
        try:
            version, code, *reason = lines[0].split(b" ", 2)
            self.status = int(code)
        except ValueError:
            self._fail(f"bad status line {lines[0][:80]!r}")
            return
        self.reason = reason[0] if reason else b""
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip()
            value = value.strip()
            headers.append((name, value))
            lname = name.lower()
            if lname == b"content-length":
                if not value.isdigit():
                    self._fail(f"bad Content-Length {value[:40]!r}")
                    return
                length = int(value)
            elif lname == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lname == b"connection":
                v = value.lower()
                if b"close" in v:
                    keep_alive = False
                elif b"keep-alive" in v:
                    keep_alive = True
        if 100 <= self.status < 200:  # interim response: skip it
            self._buf = rest
            if rest:
                self._head(t)
            return
        self.headers = headers
        self.keep_alive = keep_alive
        self._chunked = chunked
        self._until_close = False
        if chunked:
            self._remaining = -1
        elif length is not None:
            self._remaining = length
        elif self.status in (204, 304):
            self._remaining = 0
        else:
            self._until_close = True
            self.keep_alive = False
        self._state = 1
        if not chunked and not self._until_close and self._remaining == 0:
            self._state = 2
            self._eof = True
        if rest:
            self._body(rest, t)

    def _body(self, data: bytes, t: float) -> None:
        if self._until_close:
            self._emit(data, t)
            return
        if not self._chunked:
            n = self._remaining
            if len(data) >= n:
                self._remaining = 0
                self._state = 2
                self._eof = True
                if n:
                    self._emit(data[:n], t)
            else:
                self._remaining = n - len(data)
                self._emit(data, t)
            return
        # chunked transfer coding: _remaining = bytes left of the current chunk's data (+2 for
        # its CRLF); -1 = expecting a size line; -2 = expecting trailers after the last chunk
        out: list[bytes] = []
        pos = 0
        size = len(data)
        while pos < size:
            rem = self._remaining
            if rem > 0:
                take = min(rem, size - pos)
                piece_end = pos + take
                data_left = rem - 2  # data bytes left before the CRLF
                if data_left > 0:
                    out.append(data[pos : min(piece_end, pos + data_left)])
                self._remaining = rem - take
                pos = piece_end
                if self._remaining == 0:
                    self._remaining = -1
                continue
            if rem == -1:
                m = _CHUNK_SIZE(data, pos)
                if m is None:
                    if data.find(b"\r\n", pos) >= 0 or size - pos > 1024:
                        self._fail(f"bad chunk size line {data[pos:pos + 40]!r}")
                        return
                    self._buf = data[pos:]  # size line split across reads
                    break
                n = int(m.group(1), 16)
                pos = m.end()
                if n == 0:
                    self._remaining = -2
                    continue
                end = pos + n
                if end + 2 <= size:  # the whole chunk is here: the common case
                    out.append(data[pos:end])
                    pos = end + 2
                    continue
                self._remaining = n + 2
                continue
            # rem == -2: trailers until an empty line
            if data.startswith(b"\r\n", pos):
                self._state = 2
                self._eof = True
                pos += 2
                break
            end = data.find(b"\r\n\r\n", pos)
            if end < 0:
                self._buf = data[pos:]
                break
            self._state = 2
            self._eof = True
            pos = end + 4
            break
        if out:
            self._emit(out[0] if len(out) == 1 else b"".join(out), t)

    def _emit(self, data: bytes, t: float) -> None:
        sink = self.sink
        if sink is None:
            self._queue.append((data, t))
            return
        try:
            sink(data, t)
        except Exception as exc:  # a malformed event: end this response, keep the loop alive
            self.sink = None
            self.error = exc
            if self.transport is not None:
                self.transport.close()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- used by the stream -------------------------------------------------------------------
    def reset(self) -> None:
        self._state = 0
        self._buf = b""
        self._queue.clear()
        self._eof = False
        self.got_bytes = False
        self.error = None
        self.headers = []
        self.sink = None

    async def wait(self, timeout: float | None) -> None:
        """Wait for a wake-up; TimeoutError once no byte arrived for ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        w = self._waiter = loop.create_future()
        if timeout:
            rest = max(0.0, timeout - (perf_counter() - self.t_last))
            self._timer = loop.call_at(loop.time() + rest, self._idle_check, w, timeout)
        try:
            await w
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._waiter = None

    def _idle_check(self, w: asyncio.Future[None], timeout: float) -> None:
        if w.done():
            return
        idle = perf_counter() - self.t_last
        if idle >= timeout:
            w.set_exception(TimeoutError())
        else:  # data arrived meanwhile: re-arm for the rest of the idle window
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(loop.time() + timeout - idle, self._idle_check, w, timeout)


class StampedStream(httpx.AsyncByteStream):
    """Response body of a ``StampingTransport`` response. ``t`` is the ``perf_counter()`` stamp
    (taken in ``data_received``) of the chunk most recently yielded."""

    __slots__ = ("_conn", "_pool", "_read_timeout", "t", "_done", "t_sent")

    def __init__(self, conn: _Conn, pool: StampingTransport, read_timeout: float | None,
                 t_sent: float) -> None:
        self.t_sent = t_sent
        """``perf_counter()`` when the request left: just before taking a pooled connection
        (so a new connection's set-up counts) and writing the request."""
        self._conn = conn
        self._pool = pool
        self._read_timeout = read_timeout
        self.t = conn.t_first
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        q = conn._queue
        while True:
            while q:
                data, self.t = q.popleft()
                yield data
            if conn._eof:
                break
            if conn.error is not None:
                raise conn.error
            await self._wait_for_data()
        self._done = True

    async def consume(self, feed: Callable[[bytes, float], None]) -> None:
        """Call ``feed(data, t)`` for every read of the body, from inside ``data_received``;
        return at the end of the body. Raises the transport's error, ``httpx.ReadTimeout``, or
        whatever ``feed`` raised (the connection is then closed)."""
        conn = self._conn
        q = conn._queue
        while q:  # bytes that arrived with the head
            data, t = q.popleft()
            feed(data, t)
        conn.sink = feed
        try:
            while not conn._eof:
                if conn.error is not None:
                    raise conn.error
                await self._wait_for_data()
            if conn.error is not None:  # feed raised on the final read
                raise conn.error
        finally:
            conn.sink = None
        self._done = True

    async def _wait_for_data(self) -> None:
        """Wait for the next read; silence longer than the read timeout closes the connection
        and raises httpx.ReadTimeout."""
        conn = self._conn
        try:
            await conn.wait(self._read_timeout)
        except TimeoutError:
            conn.error = httpx.ReadTimeout(f"no data for {self._read_timeout} s")
            self._close_conn()
            raise conn.error from None

    def _close_conn(self) -> None:
        if self._conn.transport is not None:
            self._conn.transport.close()
        self._conn.closed = True

    async def aclose(self) -> None:
        conn = self._conn
        if self._done and conn._state == 2 and conn.keep_alive and not conn.closed:
            self._pool._release(conn)
        else:
            self._close_conn()
            self._pool._forget(conn)


class StampingTransport(httpx.AsyncBaseTransport):
    """Minimal HTTP/1.1 keep-alive transport with per-read arrival stamps (see module doc).
    The pool is unlimited: a request takes an idle connection of its origin or opens one."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._all: set[_Conn] = set()
        self._ssl = ssl_context

    def _release(self, conn: _Conn) -> None:
        conn.reset()
        self._idle.setdefault(conn.key, []).append(conn)

    def _forget(self, conn: _Conn) -> None:
        self._all.discard(conn)

    async def _connect(self, key: tuple[str, str, int], timeout: float | None) -> _Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ctx: ssl.SSLContext | None = None
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                _, proto = await loop.create_connection(
                    lambda: _Conn(key), host, port, ssl=ctx, server_hostname=host if ctx else None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"connect to {host}:{port}: {exc}") from exc
        self._all.add(proto)
        return proto

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {scheme!r}")
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, url.host, port)
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        payload = request.extensions.get("specgrid_wire")
        if payload is None:  # serialise once per Request object (the runner reuses them)
            body = await request.aread()
            head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), url.raw_path)]
            for name, value in request.headers.raw:
                head.append(b"%s: %s\r\n" % (name, value))
            head.append(b"\r\n")
            payload = b"".join(head) + body
            request.extensions["specgrid_wire"] = payload
        t_sent = perf_counter()
        for attempt in (0, 1):
            idle = self._idle.get(key)
            conn = None
            while idle:
                c = idle.pop()
                if not c.closed:
                    conn = c
                    break
                self._all.discard(c)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key, timeouts.get("connect"))
            assert conn.transport is not None
            conn.t_last = perf_counter()  # read timeouts count from the request
            conn.transport.write(payload)
            try:
                while conn._state == 0:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(read_timeout)
            except TimeoutError:
                conn.transport.close()
                self._all.discard(conn)
                raise httpx.ReadTimeout(f"no response head within {read_timeout} s") from None
            except httpx.RemoteProtocolError:
                self._all.discard(conn)
                if reused and not conn.got_bytes and attempt == 0:
                    continue  # stale keep-alive connection closed by the server: retry once
                raise
            except BaseException:  # cancelled (request timeout): the connection is unusable
                conn.transport.close()
                self._all.discard(conn)
                raise
            break
        assert conn is not None  # the loop above either got a response head or raised
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

    async def aclose(self) -> None:
        for conn in list(self._all):
            if conn.transport is not None:
                conn.transport.close()
        self._all.clear()
        self._idle.clear()


def make_transport(name: str, connect_timeout_s: float = 10.0) -> httpx.AsyncBaseTransport:
    """Build the named transport with an unlimited pool: ``raw`` | ``aiohttp`` | ``httpcore``."""
    if name == "raw":
        return StampingTransport()
    if name == "httpcore":
        return httpx.AsyncHTTPTransport(limits=UNLIMITED)
    if name == "aiohttp":
        import aiohttp
        from httpx_aiohttp import AiohttpTransport

        def session() -> aiohttp.ClientSession:
            # limit=0: unlimited. AiohttpTransport's own connector falls back to aiohttp's
            # default of 100 connections when httpx.Limits(max_connections=None) is passed.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=False)
            return aiohttp.ClientSession(connector=connector, read_bufsize=AIOHTTP_READ_BUFSIZE)

        return AiohttpTransport(limits=UNLIMITED, client=session)
    raise ValueError(f"unknown transport {name!r}; choose raw, aiohttp or httpcore")
