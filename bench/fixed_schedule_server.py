"""A fast local streaming server speaking SGLang-native ``/generate`` (and OpenAI
``/v1/chat/completions``) that emits tokens on a fixed schedule and stamps its own send times.

Used by the load generator's benches under bench/ and by its tests (real sockets, fault
injection). Raw ``asyncio.Protocol`` HTTP/1.1 with keep-alive and chunked transfer encoding, so
the server itself costs little CPU; the stream's bytes are bench/_stream.py's ``frames``.

Schedule of one request (times relative to ``recv``, stamped in ``data_received`` when the
request's last byte arrived):
  chunk 0 at ``ttft_ms``; chunk j at ``ttft_ms + j * chunk_ms``; each chunk carries 1-3 tokens
  (seeded by the prompt text), the final one the finish reason and SGLang's speculation counters.
  Paced chunks are written by one heap-driven task (no task switch per chunk); the write time
  of every chunk is stamped. ``ttft_ms == chunk_ms == 0`` means no delay: one pump task writes
  the next chunk of every active stream per event-loop turn (each chunk its own write; streams
  interleave like a real server's), as fast as the server core allows.

Burst mode (``/sched/0/<step_ms>/burst/<n>``): a request is held until ``n`` requests are held
(or no new one came for ``BURST_QUIET_S``: a partial burst); then all of them are streamed in
lock step, one token per chunk, chunk j of every stream written back to back in one event-loop
turn, each step ``step_ms`` after the previous one's last write (a late step never brings two
at once), so equal requests end in the same step, as a simulator or an engine
ends a batch. Each release is stamped (``GET /bursts``: the first and last write of its final
step, its size, and the receive stamps of the requests it answered, then cleared): a
closed-loop client's next wave is the requests received after a release, and how long after
the final step's last write each arrived is that client's burst dispatch time, measured by the
server for every client alike.

Paths (a prefix selects the schedule or a fault, so one server serves every phase):
  ``POST [/sched/<ttft_ms>/<chunk_ms>][/burst/<n>][/fault/<kind>]/generate`` and
  ``.../v1/chat/completions``
  fault kinds: ``500`` (HTTP 500), ``hang`` (headers then silence), ``broken`` (malformed JSON
  event after the first chunk), ``close`` (connection dropped mid-stream), ``abort``
  (finish_reason type abort).
  ``GET /health`` -> 200; ``GET /bursts`` (above); ``GET /stamps`` -> JSON
  ``{prompt_text: {"recv": t, "sent": [t...], "tokens": [k...]}}`` of requests since the last
  call (times are ``time.perf_counter()``, which is CLOCK_MONOTONIC and comparable across
  processes on Linux), then cleared.

Run: ``python bench/fixed_schedule_server.py --port 31234 [--ttft-ms 20 --chunk-ms 10]``
(on uvloop). Prints ``READY <port>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import json
import re
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from _common import run_on, taskset
from _stream import STREAM_HEAD, chunk_plan, frames

BURST_QUIET_S = 0.2
"""A burst that has not filled releases what it holds after this long without a new request
(a warm-up request, the last wave of a run)."""
# the path's prefixes, in this order (module doc), then the route
_PATH = re.compile(r"(?:/sched/([^/]+)/([^/]+))?(?:/burst/(\d+))?(?:/fault/([^/?]+))?([^?]*)")
_LENGTH = re.compile(r"^content-length:\s*(\d+)", re.IGNORECASE | re.MULTILINE)


class _Burst:
    """Burst mode (module doc): streams held until ``n`` are held, then streamed in lock step;
    every release stamped."""

    def __init__(self) -> None:
        self.held: list[tuple[asyncio.Transport, list[bytes | None], float,
                              asyncio.Future[None]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.releases: list[dict[str, Any]] = []

    def hold(self, n: int, step_s: float, tr: asyncio.Transport, chunks: list[bytes | None],
             t_recv: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.held.append((tr, chunks, t_recv, fut))
        if self.timer is not None:
            self.timer.cancel()
        if len(self.held) >= n:
            self.release(n, step_s)
        else:
            self.timer = loop.call_later(BURST_QUIET_S, self.release, n, step_s)
        return fut

    def release(self, n: int, step_s: float) -> None:
        held, self.held, self.timer = self.held, [], None
        for tr, *_ in held:
            tr.write(STREAM_HEAD)
        asyncio.get_running_loop().create_task(self._stream(held, n, step_s))

    async def _stream(self, held: list[Any], n: int, step_s: float) -> None:
        steps = max(len(h[1]) for h in held)
        first = last = perf_counter()
        for j in range(steps):
            if j:  # a step after the previous one, never two at once after a late wake-up
                while (delay := last + step_s - perf_counter()) > 0:
                    await asyncio.sleep(delay)
            first = perf_counter()
            for tr, chunks, *_ in held:
                if j < len(chunks) and chunks[j] is not None and not tr.is_closing():
                    tr.write(chunks[j])
            last = perf_counter()
        self.releases.append({"first_write": first, "last_write": last, "size": len(held),
                              "full": len(held) >= n, "recv": [h[2] for h in held]})
        for *_, fut in held:
            if not fut.done():
                fut.set_result(None)

def _write_next(st: list[Any]) -> bool:
    """Write chunk j of stream ``st`` = [conn, chunks, j, sent, fut, ...] and stamp it (None:
    drop the connection); False once the stream has ended and its future is set."""
    conn, chunks, j, sent, fut = st[:5]
    data = None if conn.closed else chunks[j]
    if data is not None:
        sent.append(perf_counter())
        conn.transport.write(data)
        st[2] = j = j + 1
        if j < len(chunks):
            return True
    elif not conn.closed:
        conn.transport.close()
    fut.set_result(None)
    return False


class _Pacer:
    """Paced streaming: one task keeps a heap of (due time, stream) and writes every chunk that
    is due, then sleeps until the next one. No future or task switch per chunk, so the server's
    own loop stays responsive (its receive and send stamps stay precise) at thousands of
    chunks/s."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, list[Any]]] = []
        self.seq = 0
        self.task: asyncio.Task[None] | None = None
        self.wake: asyncio.Future[None] | None = None
        self.sleep_until = float("inf")

    def add(self, conn: _Conn, chunks: list[bytes | None], sent: list[float], first: float,
            gap: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.seq += 1
        heapq.heappush(self.heap, (first, self.seq, [conn, chunks, 0, sent, fut, first, gap]))
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._run())
        elif first < self.sleep_until and self.wake is not None and not self.wake.done():
            self.wake.set_result(None)
        return fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        heap = self.heap
        while heap:
            now = perf_counter()
            while heap and heap[0][0] <= now:
                _, _, st = heapq.heappop(heap)
                if _write_next(st):  # due again at first + j * gap
                    self.seq += 1
                    heapq.heappush(heap, (st[5] + st[2] * st[6], self.seq, st))
            if not heap:
                break
            self.sleep_until = heap[0][0]
            self.wake = loop.create_future()
            handle = loop.call_at(loop.time() + max(0.0, self.sleep_until - perf_counter()),
                                  _set_done, self.wake)
            await self.wake
            handle.cancel()
            self.sleep_until = float("inf")


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Pump:
    """Zero-delay streaming: one task writes the next chunk of every active stream per event-loop
    turn (streams interleave like a real server's, without a coroutine switch per chunk)."""

    def __init__(self) -> None:
        self.active: list[list[Any]] = []
        self.new: list[list[Any]] = []
        self.task: asyncio.Task[None] | None = None

    def add(self, conn: _Conn, chunks: list[bytes | None], sent: list[float]
            ) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.new.append([conn, chunks, 0, sent, fut])
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
        return fut

    async def _run(self) -> None:
        while self.active or self.new:
            # a stream whose socket buffer is full waits for its turn after resume_writing
            self.active = [st for st in self.active
                           if (st[0].paused and not st[0].closed) or _write_next(st)] + self.new
            self.new = []
            await asyncio.sleep(0)


@dataclass
class ServerConfig:
    ttft_ms: float = 20.0
    """Default delay of the first chunk after the request (a ``/sched/`` prefix overrides)."""
    chunk_ms: float = 10.0
    """Default gap between chunks."""
    max_tokens_per_chunk: int = 3
    spec: bool = True
    """Add spec_verify_ct / spec_accept_length to the final meta_info."""
    record: bool = True
    """Keep per-request send stamps for ``GET /stamps``."""
    stamps: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the server's writers, one of each per server
    _pacer: _Pacer = field(default_factory=_Pacer, repr=False)
    _pump: _Pump = field(default_factory=_Pump, repr=False)
    _burst: _Burst = field(default_factory=_Burst, repr=False)


class _Conn(asyncio.Protocol):
    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.buf = b""
        self.busy = False
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.paused = False
        self.t_data = 0.0
        """When the latest bytes arrived: a request that came while the previous one was still
        being answered is stamped with its arrival, not with when its turn came."""

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self.t_data = perf_counter()
        self.buf += data
        self._maybe_dispatch()

    # -- HTTP ---------------------------------------------------------------------------------
    def _maybe_dispatch(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1")
        method, path, _ = head.split(" ", 2)
        m = _LENGTH.search(head)
        length = int(m.group(1)) if m else 0
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        self.busy = True
        t_recv = self.t_data  # the request is complete: stamp it here, not in the task
        asyncio.get_running_loop().create_task(self._handle(method, path, body, t_recv))

    def _simple(self, status: str, body: bytes, ctype: str = "application/json") -> None:
        assert self.transport is not None
        self.transport.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: "
                             f"{len(body)}\r\nConnection: keep-alive\r\n\r\n".encode() + body)

    async def _handle(self, method: str, path: str, body: bytes, t_recv: float) -> None:
        try:
            await self._route(method, path, body, t_recv)
        except Exception as exc:  # pragma: no cover - diagnostic only
            print(f"server error: {exc!r}", file=sys.stderr)
            if self.transport is not None:
                self.transport.close()
            return
        self.busy = False
        if not self.closed and self.buf:
            self._maybe_dispatch()

    async def _route(self, method: str, path: str, body: bytes, t_recv: float) -> None:
        m = _PATH.match(path)
        assert m is not None  # every group is optional
        ttft_ms, chunk_ms, burst, fault, route = m.groups()
        get = method == "GET"
        if get and route in ("/health", "/health_generate", "/ready"):
            self._simple("200 OK", b"ok", "text/plain")
        elif get and route == "/bursts":  # then cleared, as /stamps
            burst_mode = self.cfg._burst
            releases, burst_mode.releases = burst_mode.releases, []
            self._simple("200 OK", json.dumps(releases).encode())
        elif get and route == "/stamps":
            stamps, self.cfg.stamps = self.cfg.stamps, {}
            self._simple("200 OK", json.dumps(stamps).encode())
        elif method != "POST" or route not in ("/generate", "/v1/chat/completions"):
            self._simple("404 Not Found", b'{"error":"not found"}')
        elif fault == "500":
            self._simple("500 Internal Server Error", b'{"error":"injected"}')
        else:
            ttft = self.cfg.ttft_ms if ttft_ms is None else float(ttft_ms)
            gap = self.cfg.chunk_ms if chunk_ms is None else float(chunk_ms)
            await self._generate(route == "/v1/chat/completions", json.loads(body), t_recv,
                                 ttft / 1000.0, gap / 1000.0, burst, fault)

    async def _generate(self, chat: bool, req: dict[str, Any], t_recv: float, ttft: float,
                        gap: float, burst: str | None, fault: str | None) -> None:
        if chat:
            prompt = req["messages"][-1]["content"]
            n_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            continuous = bool((req.get("stream_options") or {}).get("continuous_usage_stats"))
        else:
            prompt = req.get("text", "")
            n_tokens = int(req.get("sampling_params", {}).get("max_new_tokens", 16))
            continuous = False
        tr = self.transport
        assert tr is not None
        if burst is not None:  # one token per chunk, each step ``gap`` after the last
            chunks = frames([1] * n_tokens, len(prompt), chat, continuous, self.cfg.spec, None)
            await self.cfg._burst.hold(int(burst), gap, tr, chunks, t_recv)
            return
        tr.write(STREAM_HEAD)
        if fault == "hang":
            await asyncio.sleep(3600)
            return
        plan = chunk_plan(prompt, n_tokens, self.cfg.max_tokens_per_chunk)
        chunks = frames(plan, len(prompt), chat, continuous, self.cfg.spec, fault)
        sent: list[float] = []
        if ttft > 0 or gap > 0:
            await self.cfg._pacer.add(self, chunks, sent, t_recv + ttft, gap)
        else:
            await self.cfg._pump.add(self, chunks, sent)
        if self.cfg.record and not self.closed:
            self.cfg.stamps[prompt] = {"recv": t_recv, "sent": sent, "tokens": plan}


async def start_server(host: str = "127.0.0.1", port: int = 0, cfg: ServerConfig | None = None
                       ) -> tuple[asyncio.Server, int, ServerConfig]:
    """Start the server on the running loop; returns (server, bound port, config)."""
    config = cfg or ServerConfig()
    server = await asyncio.get_running_loop().create_server(lambda: _Conn(config), host, port,
                                                            backlog=4096)
    return server, server.sockets[0].getsockname()[1], config


async def _main(args: argparse.Namespace) -> None:
    cfg = ServerConfig(ttft_ms=args.ttft_ms, chunk_ms=args.chunk_ms, record=not args.no_record)
    server, port, _ = await start_server(args.host, args.port, cfg)
    gc.collect()  # then no collector pauses in the server's own send/receive stamps
    gc.freeze()
    gc.disable()
    print(f"READY {port}", flush=True)
    async with server:
        await server.serve_forever()


def launch(cpu: int | None = None, *flags: str) -> tuple[subprocess.Popen[str], str]:
    """Start this server in a process of its own, on CPU ``cpu`` when given and the machine has
    more than one; return the process and its base URL (the port the OS chose, read from the
    server's ``READY <port>`` line). The benchmarks under bench/ all start it this way."""
    proc = subprocess.Popen([*taskset(cpu), sys.executable, str(Path(__file__).resolve()),
                             "--port", "0", *flags], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline().split()[1])}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--chunk-ms", type=float, default=10.0)
    p.add_argument("--no-record", action="store_true", help="keep no stamps for GET /stamps")
    run_on("uvloop", _main(p.parse_args()))


if __name__ == "__main__":
    main()
