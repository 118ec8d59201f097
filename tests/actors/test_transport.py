"""The raw stamping transport (actors/loadgen/transport.py, actors/loadgen/h1.py) over real
sockets: keep-alive, connections that turn readable while idle, keep-alive expiry, HEAD, streamed
request bodies, stale connections, read timeouts, TLS settings on every transport, and the
aiohttp transport through a proxy. Response parsing itself: tests/actors/test_h1_differential.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.loadgen.transport import StampingTransport, make_transport

HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


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


def test_consume_then_writes_the_next_request_on_the_same_connection() -> None:
    """``consume``'s ``then`` runs the moment a body ended on a reusable connection; a request
    written from there goes out on that connection and is answered through the send it gets
    back. A ``then`` that writes nothing leaves the connection to the pool; a response that
    closes its connection calls no ``then``."""
    seen: list[tuple[int, bytes]] = []  # (connection number, request line)

    async def count_per_connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        me = len({c for c, _ in seen}) + 1
        while True:
            try:
                head = await r.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            line = head.split(b"\r\n", 1)[0]
            seen.append((me, line))
            body = line.split(b" ")[1]
            close = body.endswith(b"/close")
            w.write(HEAD_CHUNKED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
                    if close else HEAD_CHUNKED)
            w.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            await w.drain()
            if close:
                w.close()
                return

    async def go() -> None:
        server, port = await _serve(count_per_connection)
        url = f"http://127.0.0.1:{port}"
        tr = StampingTransport()
        async with httpx.AsyncClient(transport=tr) as client:
            got: list[tuple[bytes, float]] = []
            ends: list[float] = []
            sends = []

            def then(t: float, write: Any) -> None:
                ends.append(t)
                sends.append(write(client.build_request("GET", url + "/second")))

            resp = await tr.handle_async_request(client.build_request("GET", url + "/first"))
            await resp.extensions["specgrid_stream"].consume(
                lambda d, t: got.append((d, t)), then)
            await resp.aclose()
            assert [d for d, _ in got] == [b"/first"] and len(ends) == 1
            assert ends[0] >= got[-1][1]
            resp2 = await sends[0](client.build_request("GET", url + "/second"))
            stream2 = resp2.extensions["specgrid_stream"]
            assert stream2.t_sent >= ends[0]
            got.clear()
            await stream2.consume(lambda d, t: got.append((d, t)), lambda t, write: None)
            await resp2.aclose()
            assert [d for d, _ in got] == [b"/second"]
            assert seen == [(1, b"GET /first HTTP/1.1"), (1, b"GET /second HTTP/1.1")]
            assert len(tr._idle[("http", "127.0.0.1", port)]) == 1  # nothing written: pooled

            called: list[float] = []
            resp3 = await tr.handle_async_request(client.build_request("GET", url + "/close"))
            await resp3.extensions["specgrid_stream"].consume(
                lambda d, t: None, lambda t, write: called.append(t))
            await resp3.aclose()
            assert called == []  # the connection ends with the response: nothing to reuse
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
    assert isinstance(make_transport("httpx"), httpx.AsyncHTTPTransport)
    assert type(make_transport("aiohttp")).__name__ == "AiohttpTransport"
    with pytest.raises(ValueError):
        make_transport("curl")


def test_stamps_are_taken_per_read() -> None:
    async def two_chunks(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(HEAD_CHUNKED + b"5\r\nhello\r\n")
        await w.drain()
        await asyncio.sleep(0.03)
        w.write(b"5\r\nworld\r\n0\r\n\r\n")
        await w.drain()

    async def go() -> list[tuple[bytes, float]]:
        server, port = await _serve(two_chunks)
        tr = StampingTransport()
        got: list[tuple[bytes, float]] = []
        async with httpx.AsyncClient(transport=tr) as client:
            resp = await tr.handle_async_request(client.build_request("GET", f"http://127.0.0.1:{port}/"))
            stream = resp.extensions["specgrid_stream"]
            async for data in stream:
                got.append((data, stream.t))
            await resp.aclose()
        server.close()
        return got

    (d1, t1), (d2, t2) = asyncio.run(go())
    assert (d1, d2) == (b"hello", b"world") and t2 - t1 >= 0.025


class _Counting:
    """A keep-alive server that counts connections; ``after_response`` runs on the connection
    after each response (to write something while it is idle)."""

    def __init__(self, after_response: Any = None, head_body: bool = False) -> None:
        self.connections = 0
        self.after = after_response

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                if head.startswith(b"HEAD"):
                    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")  # no body
                else:
                    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await w.drain()
                if self.after is not None:
                    await self.after(w)
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()


def test_idle_connection_that_became_readable_is_not_reused() -> None:
    async def send_408_while_idle(w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.02)
        w.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        await w.drain()  # and keep the connection open: the trap

    async def go() -> int:
        srv = _Counting(send_408_while_idle)
        server, port = await _serve(srv.handle)
        async with httpx.AsyncClient(transport=StampingTransport()) as client:
            for _ in range(3):
                resp = await client.get(f"http://127.0.0.1:{port}/")
                assert (resp.status_code, resp.content) == (200, b"ok")
                await asyncio.sleep(0.06)
        server.close()
        return srv.connections

    assert asyncio.run(go()) == 3


def test_a_line_break_in_a_request_header_is_refused_not_sent() -> None:
    """httpx lets CR/LF through in header values; written as they are they would inject a
    header. The raw transport refuses the request before anything is sent."""
    async def go() -> int:
        srv = _Counting()
        server, port = await _serve(srv.handle)
        async with httpx.AsyncClient(transport=StampingTransport()) as client:
            with pytest.raises(httpx.LocalProtocolError, match="invalid character"):
                await client.get(f"http://127.0.0.1:{port}/",
                                 headers={"Authorization": "Bearer k\r\nX-Injected: 1"})
            assert (await client.get(f"http://127.0.0.1:{port}/")).content == b"ok"
        server.close()
        return srv.connections

    assert asyncio.run(go()) == 1


def test_preconnect_fills_the_pool_and_requests_reuse_it() -> None:
    async def go() -> tuple[int, int, int, int]:
        srv = _Counting()
        server, port = await _serve(srv.handle)
        url = f"http://127.0.0.1:{port}/x"
        tr = StampingTransport()
        opened = await tr.preconnect(url, 40)  # more than one batch of connects
        again = await tr.preconnect(url, 40)
        async with httpx.AsyncClient(transport=tr) as client:
            got = await asyncio.gather(*(client.get(url) for _ in range(40)))
            assert {(r.status_code, r.content) for r in got} == {(200, b"ok")}
        server.close()
        return opened, again, srv.connections, len(tr._all)

    assert asyncio.run(go()) == (40, 0, 40, 0)


@pytest.mark.parametrize("keepalive_s, connections", [(0.03, 3), (30.0, 1)])
def test_keepalive_expiry(keepalive_s: float, connections: int) -> None:
    async def go() -> int:
        srv = _Counting()
        server, port = await _serve(srv.handle)
        async with httpx.AsyncClient(transport=StampingTransport(keepalive_s=keepalive_s)) as c:
            for _ in range(3):
                assert (await c.get(f"http://127.0.0.1:{port}/")).content == b"ok"
                await asyncio.sleep(0.06)
        server.close()
        return srv.connections

    assert asyncio.run(go()) == connections


def test_head_reply_with_length_does_not_wait_for_a_body() -> None:
    async def go() -> None:
        srv = _Counting()
        server, port = await _serve(srv.handle)
        async with httpx.AsyncClient(transport=StampingTransport(),
                                     timeout=httpx.Timeout(1.0)) as client:
            resp = await client.head(f"http://127.0.0.1:{port}/")
            assert resp.status_code == 200 and resp.content == b""
            assert (await client.get(f"http://127.0.0.1:{port}/")).content == b"ok"
        server.close()

    asyncio.run(go())


def test_streamed_request_body_is_sent_chunked() -> None:
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()  # aiohttp decodes the chunked framing
        return web.json_response({"te": request.headers.get("Transfer-Encoding"),
                                  "body": body.decode()})

    async def parts() -> AsyncIterator[bytes]:
        for p in (b"hello ", b"", b"world"):
            yield p

    async def go() -> dict[str, Any]:
        app = web.Application()
        app.router.add_post("/echo", echo)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with httpx.AsyncClient(transport=StampingTransport()) as client:
                resp = await client.post(f"http://127.0.0.1:{port}/echo", content=parts())
                return dict(resp.json())
        finally:
            await runner.cleanup()

    assert asyncio.run(go()) == {"te": "chunked", "body": "hello world"}


# --- TLS --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.actors.tls_front import self_signed as make

    return make(tmp_path_factory.mktemp("tls"))


async def _tls_get(cert: Path, key: Path, transport: httpx.AsyncBaseTransport) -> httpx.Response:
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    srv = _Counting()
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.get(f"https://127.0.0.1:{port}/")
    finally:
        server.close()


@pytest.mark.parametrize("name", ["raw", "aiohttp", "httpx"])
def test_tls_verify_on_fails_clearly_off_works(name: str, self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    # (httpx-aiohttp maps aiohttp's certificate error to ConnectTimeout; the text is clear)
    with pytest.raises(httpx.TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(_tls_get(cert, key, make_transport(name)))
    resp = asyncio.run(_tls_get(cert, key, make_transport(name, tls_verify=False)))
    assert (resp.status_code, resp.content) == (200, b"ok")
    resp = asyncio.run(_tls_get(cert, key, make_transport(name, ca_bundle=str(cert))))
    assert (resp.status_code, resp.content) == (200, b"ok")


# --- proxy (aiohttp transport) ------------------------------------------------------------------
class _ForwardProxy:
    """A plain HTTP forward proxy (aiohttp.web + aiohttp client): takes absolute-form requests,
    records their targets and streams the origin's response back."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    async def start(self) -> int:
        import aiohttp
        from aiohttp import web

        async def forward(request: web.Request) -> web.StreamResponse:
            self.targets.append(str(request.url))
            async with aiohttp.ClientSession(trust_env=False) as session, session.request(
                    request.method, str(request.url), data=await request.read(),
                    headers={"Content-Type": request.headers.get("Content-Type", "")}) as up:
                resp = web.StreamResponse(status=up.status)
                await resp.prepare(request)
                async for data in up.content.iter_any():
                    await resp.write(data)
                await resp.write_eof()
                return resp

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]


def test_aiohttp_transport_goes_through_the_environment_proxy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt
    from tests.actors.bench_server import bench_server_module

    mod = bench_server_module()

    port = 0

    async def go() -> tuple[Any, list[str]]:
        nonlocal port
        proxy = _ForwardProxy()
        pport = await proxy.start()
        server, port, _ = await mod.start_server(cfg=mod.ServerConfig(ttft_ms=1, chunk_ms=1))
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{pport}")
        for name in ("NO_PROXY", "no_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        try:
            res = await run_load(LoadSpec(url=f"http://127.0.0.1:{port}",
                                          prompts=(Prompt("a", "hi", "d"),), concurrency=2,
                                          num_requests=4, max_new_tokens=5, transport="aiohttp"))
        finally:
            server.close()
            await proxy.runner.cleanup()
        return res, proxy.targets

    res, targets = asyncio.run(go())
    assert [r["status"] for r in res.rows] == ["ok"] * 4, res.rows[0]["error"]
    assert len(targets) == 4 and all(t == f"http://127.0.0.1:{port}/generate" for t in targets)
    assert json.dumps(res.stats["transport"]) == '"aiohttp"'
