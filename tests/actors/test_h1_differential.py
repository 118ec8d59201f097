"""Differential test of the raw transport's HTTP/1.1 response handling (actors/loadgen/h1.py,
llhttp through httptools) against httpcore + h11 (httpx's default transport): one battery of
normal, edge and malformed responses, each split at every byte boundary and fed byte by byte,
must give the same outcome through both: (status, body) or an error."""

from __future__ import annotations

import asyncio
from typing import Any

import httpcore
import pytest

from actors.loadgen.h1 import H1Connection

OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = OK + b"Transfer-Encoding: chunked\r\n\r\n"

BATTERY: dict[str, bytes] = {
    # normal
    "content-length": OK + b"Content-Length: 5\r\n\r\nhello",
    "chunked-sse": CHUNKED + b"c\r\ndata: one\n\n\r\n1a\r\ndata: two\n\ndata: three\n\n\r\n"
                             b"0\r\n\r\n",
    "chunk-extension-and-trailer": CHUNKED + b"5;a=b\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    "until-close-1.0": b"HTTP/1.0 200 OK\r\n\r\nabc",
    "until-close-1.1": OK + b"Content-Type: text/plain\r\n\r\nabc",
    "interim-100": b"HTTP/1.1 100 Continue\r\n\r\n" + OK + b"Content-Length: 2\r\n\r\nok",
    "no-content-204": b"HTTP/1.1 204 No Content\r\n\r\n",
    "not-modified-304-with-length": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
    "error-503": b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy",
    "408-after-response": OK + b"Content-Length: 2\r\n\r\nok"
                          + b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n",
    # edge
    "no-reason": b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
    "empty-reason": b"HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok",
    "latin1-reason": b"HTTP/1.1 200 \xe9t\xe9\r\nContent-Length: 0\r\n\r\n",
    "folded-header": OK + b"X-A: 1\r\n continued\r\nContent-Length: 2\r\n\r\nab",
    "bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "space-after-chunk-size": CHUNKED + b"5 \r\nhello\r\n0\r\n\r\n",
    "status-999": b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n",
    "http-2.0-version": b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    "control-char-in-value": OK + b"X-A: a\x01b\r\nContent-Length: 2\r\n\r\nok",
    # malformed
    "two-different-content-lengths": OK + b"Content-Length: 5\r\nContent-Length: 3\r\n\r\nhello",
    "bad-chunk-terminator": CHUNKED + b"5\r\nhelloXY0\r\n\r\n",
    "negative-chunk-size": CHUNKED + b"-5\r\nhello\r\n0\r\n\r\n",
    "non-hex-chunk-size": CHUNKED + b"zz\r\nhello\r\n0\r\n\r\n",
    "foreign-protocol": b"FOO/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "garbage": b"garbage\r\n\r\n",
    "empty": b"",
    "two-digit-status": b"HTTP/1.1 99 Odd\r\nContent-Length: 0\r\n\r\n",
    "header-without-colon": OK + b"Broken header\r\nContent-Length: 2\r\n\r\nok",
    "space-before-colon": OK + b"X-A : a\r\nContent-Length: 2\r\n\r\nok",
    "nul-in-value": OK + b"X-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
    "bad-content-length": OK + b"Content-Length: abc\r\n\r\nxyz",
    "signed-content-length": OK + b"Content-Length: +3\r\n\r\nxyz",
    "gzip-transfer-coding": OK + b"Transfer-Encoding: gzip\r\n\r\nabc",
    "gzip-chunked-transfer-coding": OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n"
                                         b"3\r\nabc\r\n0\r\n\r\n",
    "truncated-body": OK + b"Content-Length: 10\r\n\r\nhello",
    "truncated-chunk": CHUNKED + b"5\r\nhel",
    "truncated-head": OK + b"Content-Len",
}

STRICTER_THAN_H11: dict[str, bytes] = {
    # RFC 9110 §8.6: a recipient MUST either reject or merge identical duplicates
    "identical-duplicate-content-length": OK + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    # RFC 9112 §6.1: both framings "ought to be handled as an error"
    "content-length-with-chunked": OK + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
                                   b"3\r\nabc\r\n0\r\n\r\n",
    # RFC 9112 §2.3: a major version the client does not implement
    "http-9.7-version": b"HTTP/9.7 200 OK\r\nContent-Length: 0\r\n\r\n",
}
"""Where llhttp rejects what h11 accepts and the RFC allows rejecting: pinned, not hidden."""

HEAD_REPLY = OK + b"Content-Length: 5\r\n\r\n"

Outcome = tuple[Any, ...]


class _FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        self.closed = True


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    out, prev = [], 0
    for c in [*cuts, len(raw)]:
        if c > prev:
            out.append(raw[prev:c])
        prev = c
    return out


def raw_outcome(pieces: list[bytes], method: str = "GET") -> Outcome:
    """The response through H1Connection, the server closing after its last byte."""
    conn = H1Connection()
    conn.connection_made(_FakeTransport())  # type: ignore[arg-type]
    conn.begin(head_only=method == "HEAD")
    for p in pieces:
        if conn.closed:
            break
        conn.data_received(p)
    if conn.error is None and not conn.eof:
        conn.connection_lost(None)
    if conn.error is not None or not conn.eof:
        return ("error",)
    return ("ok", conn.status, b"".join(d for d, _ in conn._queue))


async def _httpcore(pieces: list[bytes], method: str) -> Outcome:
    pool = httpcore.AsyncConnectionPool(network_backend=httpcore.AsyncMockBackend(pieces))
    try:
        resp = await pool.request(method, "http://example.test/")
        return ("ok", resp.status, resp.content)
    except (httpcore.ProtocolError, httpcore.ReadError):
        return ("error",)
    finally:
        await pool.aclose()


def reference_outcome(pieces: list[bytes], method: str = "GET") -> Outcome:
    return asyncio.run(_httpcore(pieces, method))


def _splits(raw: bytes) -> list[list[int]]:
    return [[]] + [[c] for c in range(1, len(raw))] + [list(range(1, len(raw)))]


@pytest.mark.parametrize("name", list(BATTERY))
def test_same_outcome_as_httpcore_at_every_split(name: str) -> None:
    raw = BATTERY[name]
    expected = reference_outcome([raw])
    for cuts in _splits(raw):
        pieces = _pieces(raw, cuts)
        assert raw_outcome(pieces) == expected, (name, cuts[:3])
        assert reference_outcome(pieces) == expected, (name, cuts[:3])


def test_battery_covers_both_outcomes() -> None:
    outcomes = {reference_outcome([raw])[0] for raw in BATTERY.values()}
    assert outcomes == {"ok", "error"}


def test_head_response_has_no_body_whatever_its_length() -> None:
    expected = reference_outcome([HEAD_REPLY], "HEAD")
    assert expected == ("ok", 200, b"")
    for cuts in _splits(HEAD_REPLY):
        assert raw_outcome(_pieces(HEAD_REPLY, cuts), "HEAD") == expected, cuts


@pytest.mark.parametrize("name", list(STRICTER_THAN_H11))
def test_stricter_than_h11_where_the_rfc_allows(name: str) -> None:
    raw = STRICTER_THAN_H11[name]
    assert reference_outcome([raw])[0] == "ok"
    for cuts in _splits(raw):
        assert raw_outcome(_pieces(raw, cuts)) == ("error",), cuts


def test_errors_name_the_problem() -> None:
    conn = H1Connection()
    conn.connection_made(_FakeTransport())  # type: ignore[arg-type]
    conn.begin()
    conn.data_received(BATTERY["two-different-content-lengths"])
    assert "Content-Length" in str(conn.error)
    conn.begin()
    conn.data_received(BATTERY["nul-in-value"])
    assert "invalid character in header" in str(conn.error)
