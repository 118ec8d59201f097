"""The raw stamping transport (actors/loadgen/transport.py): HTTP/1.1 framing at every split
point, keep-alive, stale connections, stamps."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from actors.loadgen.transport import StampingTransport, _Conn, make_transport

HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
BODY_PARTS = [b"data: one\n\n", b"data: two\n\ndata: three\n\n", b"x" * 300]


def chunked(parts: list[bytes], trailers: bytes = b"") -> bytes:
    out = b"".join(b"%x;ext=1\r\n%b\r\n" % (len(p), p) for p in parts)
    return out + b"0\r\n" + trailers + b"\r\n"


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        self.closed = True


def feed(raw: bytes, cuts: list[int]) -> _Conn:
    conn = _Conn()
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    prev = 0
    for c in [*cuts, len(raw)]:
        if c > prev:
            conn.data_received(raw[prev:c])
        prev = c
    return conn


def body_of(conn: _Conn) -> bytes:
    return b"".join(d for d, _ in conn._queue)


@pytest.mark.parametrize("trailers", [b"", b"X-Trailer: 1\r\n"])
def test_chunked_every_split_point(trailers: bytes) -> None:
    raw = HEAD_CHUNKED + chunked(BODY_PARTS, trailers)
    for cut in range(1, len(raw)):
        conn = feed(raw, [cut])
        assert conn.error is None, cut
        assert conn.status == 200 and conn._eof and conn._state == 2, cut
        assert body_of(conn) == b"".join(BODY_PARTS), cut
    conn = feed(raw, list(range(1, len(raw))))  # byte by byte
    assert body_of(conn) == b"".join(BODY_PARTS) and conn._eof


def test_content_length_until_close_and_interim() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 5\r\n\r\nhello"
    for cut in range(1, len(raw)):
        conn = feed(raw, [cut])
        assert conn.status == 503 and body_of(conn) == b"hello" and conn._eof
        assert conn.reason == b"Busy" and conn.keep_alive
    conn = feed(b"HTTP/1.0 200 OK\r\n\r\nabc", [])
    assert not conn._eof and not conn.keep_alive
    conn.connection_lost(None)
    assert conn._eof and conn.error is None and body_of(conn) == b"abc"


def test_malformed_and_truncated() -> None:
    conn = feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", [])
    assert isinstance(conn.error, httpx.RemoteProtocolError)
    conn = feed(HEAD_CHUNKED + b"5\r\nab", [])
    conn.connection_lost(None)
    assert isinstance(conn.error, httpx.RemoteProtocolError)
    conn = feed(b"garbage\r\n\r\n", [])
    assert isinstance(conn.error, httpx.RemoteProtocolError)


def test_stamps_are_taken_per_read() -> None:
    conn = feed(HEAD_CHUNKED, [])
    conn.data_received(b"5\r\nhello\r\n")
    conn.data_received(b"5\r\nworld\r\n")
    (d1, t1), (d2, t2) = conn._queue
    assert (d1, d2) == (b"hello", b"world") and t2 >= t1 > 0


async def _serve(handler: Any) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_stale_keepalive_connection_is_retried_and_timeouts() -> None:
    async def close_after_response(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # keep-alive, then close
        await w.drain()
        w.close()

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def go() -> None:
        server, port = await _serve(close_after_response)
        async with httpx.AsyncClient(transport=StampingTransport()) as client:
            for _ in range(3):
                resp = await client.get(f"http://127.0.0.1:{port}/")
                assert resp.status_code == 200 and resp.content == b"ok"
                await asyncio.sleep(0.02)  # let the server's close arrive
        server.close()
        server2, port2 = await _serve(silent)
        async with httpx.AsyncClient(transport=StampingTransport(),
                                     timeout=httpx.Timeout(0.2)) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"http://127.0.0.1:{port2}/")
        server2.close()

    asyncio.run(go())


def test_reused_connection_closed_without_response_is_retried_once() -> None:
    async def one_per_connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        await r.readuntil(b"\r\n\r\n")  # the next request on this connection: drop it
        w.close()

    async def go() -> None:
        server, port = await _serve(one_per_connection)
        tr = StampingTransport()
        async with httpx.AsyncClient(transport=tr) as client:
            for _ in range(3):
                resp = await client.get(f"http://127.0.0.1:{port}/")
                assert resp.content == b"ok"
        server.close()

    asyncio.run(go())


def test_consume_mode_feed_errors_and_read_timeout() -> None:
    async def one_chunk_then_stall(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(HEAD_CHUNKED + b"5\r\nhello\r\n")
        await w.drain()
        await asyncio.sleep(0.05)
        w.write(b"5\r\nworld\r\n")
        await w.drain()
        await asyncio.sleep(5)

    async def go() -> None:
        server, port = await _serve(one_chunk_then_stall)
        tr = StampingTransport()
        async with httpx.AsyncClient(transport=tr, timeout=httpx.Timeout(0.3)) as client:
            req = client.build_request("GET", f"http://127.0.0.1:{port}/")
            got: list[tuple[bytes, float]] = []
            resp = await tr.handle_async_request(req)
            stream = resp.extensions["specgrid_stream"]
            with pytest.raises(httpx.ReadTimeout):  # 2nd chunk resets the idle clock
                await stream.consume(lambda d, t: got.append((d, t)))
            assert [d for d, _ in got] == [b"hello", b"world"]
            assert got[1][1] - got[0][1] >= 0.04
            await resp.aclose()

            def bad_feed(data: bytes, t: float) -> None:
                raise ValueError("malformed event")

            resp = await tr.handle_async_request(req)
            with pytest.raises(ValueError, match="malformed"):
                await resp.extensions["specgrid_stream"].consume(bad_feed)
            await resp.aclose()
            assert not tr._idle.get(("http", "127.0.0.1", port))  # broken ones not pooled
        server.close()

    asyncio.run(go())


def test_interop_with_aiohttp_web_server() -> None:
    """A mainstream HTTP server (aiohttp.web, chunked SSE like uvicorn) through run_load."""
    import json

    from aiohttp import web

    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = body["sampling_params"]["max_new_tokens"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(1, n + 1):
            meta = {"completion_tokens": i, "prompt_tokens": 2,
                    "finish_reason": {"type": "length"} if i == n else None}
            await resp.write(b"data: " + json.dumps({"text": "a" * i, "meta_info": meta}).encode()
                             + b"\n\n")
            await asyncio.sleep(0.001)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def go() -> None:
        app = web.Application()
        app.router.add_post("/generate", generate)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            res = await run_load(LoadSpec(url=f"http://127.0.0.1:{port}",
                                          prompts=(Prompt("a", "hi", "d"),), concurrency=3,
                                          num_requests=9, max_new_tokens=6))
        finally:
            await runner.cleanup()
        assert [r["status"] for r in res.rows] == ["ok"] * 9, res.rows[0]["error"]
        assert all(r["output_tokens"] == 6 and len(r["itl_s"]) == 5 for r in res.rows)

    asyncio.run(go())


def test_make_transport_names() -> None:
    assert isinstance(make_transport("raw"), StampingTransport)
    assert isinstance(make_transport("httpcore"), httpx.AsyncHTTPTransport)
    assert type(make_transport("aiohttp")).__name__ == "AiohttpTransport"
    with pytest.raises(ValueError):
        make_transport("curl")


def test_bad_content_length_is_a_protocol_error() -> None:
    conn = feed(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nxyz", [])
    assert isinstance(conn.error, httpx.RemoteProtocolError)
