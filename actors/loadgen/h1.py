"""One HTTP/1.1 client connection on ``asyncio.Protocol`` whose response parsing is llhttp
(Node.js's parser, through ``httptools``), with a ``time.perf_counter()`` stamp per read.

The wire format is llhttp's; this module only does what a parser cannot know (an idle
connection that becomes readable is closed, bytes after a response retire the connection, a
``HEAD`` reply has no body, a body delimited by the close ends at EOF), and accepts obsolete
header folding, bare-LF line ends and spaces after a chunk size as h11 does. Why, and where
llhttp is stricter than h11 (tests/actors/test_h1_differential.py): docs/loadgen.md ("HTTP
clients").
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable
from time import perf_counter

import httptools
import httpx

Sink = Callable[[bytes, float], None]


class H1Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request/response at a time (``begin`` before each)."""

    __slots__ = (
        "key", "transport", "closed", "error", "active", "idle_since", "head_only", "_parser",
        "status", "reason", "headers", "head_done", "eof", "keep_alive", "_framed",
        "_pieces", "_queue", "_waiter", "got_bytes", "t_first", "t_last", "sink", "_timer",
        "_callbacks", "_head_callbacks", "on_end",
    )

    def __init__(self, key: tuple[str, str, int] = ("", "", 0)) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: Exception | None = None
        self.active = False
        """A request is in flight (between ``begin`` and the pool taking it back)."""
        self.idle_since = 0.0
        self.head_only = False
        self._parser: httptools.HttpResponseParser | None = None
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.eof = False
        """The response is complete."""
        self.keep_alive = True
        self._framed = False
        self._pieces: list[bytes] = []
        self._queue: deque[tuple[bytes, float]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.got_bytes = False
        self.t_first = 0.0
        self.t_last = 0.0
        self.sink: Sink | None = None
        self.on_end: Callable[[float], None] | None = None
        """Called inside ``data_received`` (with the read's stamp) when a response read in sink
        mode ended and the connection can take the next request: the caller may write that
        request on it right there (``StampedStream.consume``'s ``then``)."""
        self._timer: asyncio.TimerHandle | None = None
        self._callbacks = _Callbacks(self, self._pieces.append)
        self._head_callbacks: _Callbacks | None = None

    # -- request life cycle -------------------------------------------------------------------
    def begin(self, head_only: bool = False) -> None:
        """Prepare for the response to a request about to be written."""
        if head_only and self._head_callbacks is None:
            self._head_callbacks = _Callbacks(self, _discard)  # a HEAD reply has no body
        parser = httptools.HttpResponseParser(
            self._head_callbacks if head_only else self._callbacks)  # type: ignore[arg-type]
        # obs-fold (RFC 9112 §5.2), bare LF line ends (§2.2 "MAY"), spaces after a chunk size,
        # as h11 accepts them; NUL/CR/LF inside a value are still rejected (on_header)
        parser.set_dangerous_leniencies(lenient_headers=True, lenient_optional_cr_before_lf=True,
                                        lenient_spaces_after_chunk_size=True)
        self._parser = parser
        self.active = True
        self.head_only = head_only
        self.status = 0
        self.reason = b""
        self.headers = []
        self.head_done = False
        self.eof = False
        self.keep_alive = True
        self._framed = False
        self._pieces.clear()
        self._queue.clear()
        self.got_bytes = False
        self.error = None
        self.sink = None
        self.on_end = None
        self.t_last = perf_counter()  # read timeouts count from the request

    @property
    def reusable(self) -> bool:
        return self.eof and self.keep_alive and not self.closed and self.error is None

    def park(self) -> None:
        """The response was read to its end; the connection waits in the pool."""
        self.active = False
        self.sink = None
        self.on_end = None
        self._queue.clear()
        self._parser = None
        self.idle_since = perf_counter()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.active and not self.eof and self.error is None:
            if self.head_done and not self._framed:
                self.eof = True  # body delimited by the close
            else:
                self.error = httpx.RemoteProtocolError(
                    "server closed the connection"
                    + (" before the response ended" if self.got_bytes else " without a response")
                )
        self._wake()

    def data_received(self, data: bytes) -> None:
        t = perf_counter()
        self.t_last = t
        if not self.active:  # readable while idle: whatever it is, not the next reply
            self.close()
            return
        if self.eof or self.error is not None:  # bytes beyond the response
            self.keep_alive = False
            return
        if not self.got_bytes:
            self.got_bytes = True
            self.t_first = t
        parser = self._parser
        assert parser is not None
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("unexpected protocol upgrade"))
        except httptools.HttpParserError as exc:
            if not self.eof:  # after the end = data beyond the response (on_message_begin)
                self._fail(httpx.RemoteProtocolError(
                    f"malformed HTTP response: {exc.__context__ or exc}"))
            self.keep_alive = False
        pieces = self._pieces
        if pieces:
            body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            pieces.clear()
            sink = self.sink
            if sink is None:
                self._queue.append((body, t))
            else:
                try:
                    sink(body, t)
                except Exception as exc:  # a malformed event: end this response, not the loop
                    self.sink = None
                    self._fail(exc)
        if self.eof and self.on_end is not None:
            on_end, self.on_end = self.on_end, None
            if self.reusable:
                on_end(t)  # may begin the next request on this connection
        # wake the reader per read while waiting for the head or in queue mode; in sink mode
        # only at the end of the body (or when ``on_end`` began the next request) or on an error
        if self._waiter is not None and (
            self.sink is None or self.eof or self.error is not None or not self.head_done
        ):
            self._wake()

    # -- llhttp callbacks -----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.eof:
            raise _BeyondResponse  # a second message on a one-request exchange

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if b"\x00" in value or b"\r" in value or b"\n" in value:  # RFC 9110 §5.5
            raise ValueError(f"invalid character in header {name[:40]!r}")
        self.headers.append((name, value))
        lname = name.lower()
        if lname == b"content-length":
            self._framed = True
        elif lname == b"transfer-encoding":
            if value.strip().lower() != b"chunked":  # no decoder for gzip & co here
                raise ValueError(f"unsupported transfer coding {value[:40]!r}")
            self._framed = True

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        status = parser.get_status_code()
        if 100 <= status < 200:  # interim response: skip it
            self.headers = []
            self.reason = b""
            self._framed = False
            return
        self.status = status
        self.head_done = True
        self.keep_alive = parser.should_keep_alive()
        if status in (204, 304):
            self._framed = True
        if not self._framed:  # body until close: the connection cannot be reused
            self.keep_alive = False
        if self.head_only:
            self.eof = True
            self.keep_alive = False

    def on_message_complete(self) -> None:
        if not self.head_done:  # end of an interim response
            return
        self.eof = True

    # -- helpers --------------------------------------------------------------------------------
    def _fail(self, error: Exception) -> None:
        self.error = error
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

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


class _Callbacks:
    """What llhttp calls: the connection's methods, and for body bytes a list's ``append``
    (the parser calls ``on_body`` once per HTTP chunk, so a builtin there instead of a Python
    method saves a frame per streamed event; httptools looks the callbacks up once, when the
    parser is built)."""

    __slots__ = ("on_message_begin", "on_status", "on_header", "on_headers_complete",
                 "on_body", "on_message_complete")

    def __init__(self, conn: H1Connection, on_body: Callable[[bytes], object]) -> None:
        self.on_message_begin = conn.on_message_begin
        self.on_status = conn.on_status
        self.on_header = conn.on_header
        self.on_headers_complete = conn.on_headers_complete
        self.on_body = on_body
        self.on_message_complete = conn.on_message_complete


def _discard(body: bytes) -> None:
    pass


class _BeyondResponse(Exception):
    """Raised inside the parser when bytes follow the end of the response."""
