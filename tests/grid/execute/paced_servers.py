"""Servers for the cell bounds' tests (tests/grid/execute/test_bounds.py,
tests/grid/execute/test_nonblocking.py), run in the test's own process on a thread of their own
and reached as engine=external: one that streams on a slow fixed schedule
(bench/fixed_schedule_server.py), one that accepts every generation request and sends
nothing, and a relay to a real server that holds one request a while."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from tests.actors.bench_server import bench_server_module


@contextmanager
def _serving(start: Callable[[], Coroutine[Any, Any, tuple[asyncio.Server, int]]]
             ) -> Iterator[str]:
    """Run the server `start` makes on an event loop in a daemon thread; its base URL."""
    ports: queue.Queue[int] = queue.Queue()
    stop = threading.Event()

    async def main() -> None:
        server, port = await start()
        ports.put(port)
        while not stop.is_set():
            await asyncio.sleep(0.05)
        server.close()  # asyncio.run then cancels the streams still open

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{ports.get(timeout=10)}"
    finally:
        stop.set()
        thread.join(timeout=10)


@contextmanager
def paced_server(ttft_ms: float, chunk_ms: float) -> Iterator[str]:
    """SGLang-native /generate streaming one token per chunk: the first at `ttft_ms`, then one
    every `chunk_ms` (a request of k tokens ends at ttft + (k - 1) x chunk)."""
    mod = bench_server_module()

    async def start() -> tuple[asyncio.Server, int]:
        config = mod.ServerConfig(ttft_ms=ttft_ms, chunk_ms=chunk_ms, max_tokens_per_chunk=1,
                                  spec=False, record=False)
        server, port, _ = await mod.start_server(cfg=config)
        return server, port

    with _serving(start) as url:
        yield url


class _Silent(asyncio.Protocol):
    """/health answers 200; a generation request (POST /generate, /v1/...) is read whole and
    never answered (not a byte); anything else is 404 (so the driver's probes of what the
    server offers, a cache flush among them, find nothing)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport, self.buf = transport, b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, _, rest = self.buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            if len(rest) < length:
                return
            self.buf = rest[length:]
            if lines[0].startswith(("POST /generate ", "POST /v1/")):
                continue  # accepted, and never answered
            found = lines[0].startswith("GET /health ")
            body = b"ok" if found else b"not found"
            self.transport.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s" % (
                b"200 OK" if found else b"404 Not Found", len(body), body))


@contextmanager
def silent_server() -> Iterator[str]:
    async def start() -> tuple[asyncio.Server, int]:
        server = await asyncio.get_running_loop().create_server(_Silent, "127.0.0.1", 0)
        return server, int(server.sockets[0].getsockname()[1])

    with _serving(start) as url:
        yield url


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@contextmanager
def held_front(backend_port: int, hold: bytes, hold_s: float
               ) -> Iterator[tuple[str, list[float]]]:
    """A relay on 127.0.0.1 to the server at `backend_port`, byte for byte, but for the first
    connection whose request line starts with `hold`: that request is passed on only
    `hold_s` after it arrived. Yields (its URL, `held`): `held` gets the wall-clock time
    (time.time()) the held request arrived and the time it was passed on."""
    held: list[float] = []

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b""
        while b"\r\n" not in head and (data := await reader.read(65536)):
            head += data
        if head.startswith(hold) and not held:
            held.append(time.time())
            await asyncio.sleep(hold_s)
            held.append(time.time())
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend_port)
        except OSError:
            writer.close()
            return
        up_writer.write(head)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def start() -> tuple[asyncio.Server, int]:
        server = await asyncio.start_server(relay, "127.0.0.1", 0)
        return server, int(server.sockets[0].getsockname()[1])

    with _serving(start) as url:
        yield url, held
