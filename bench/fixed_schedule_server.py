"""A fast local streaming server speaking SGLang-native ``/generate`` (and OpenAI
``/v1/chat/completions``) that emits tokens on a fixed schedule and stamps its own send times.

Used by ``bench/loadgen_throughput.py`` (throughput and timing error of the load generator) and by
``tests/actors/test_runner.py`` (real sockets, fault injection). Raw ``asyncio.Protocol`` HTTP/1.1
with keep-alive and chunked transfer encoding, so the server itself costs little CPU.

Schedule of one request (times relative to ``recv``, stamped in ``data_received`` when the
request's last byte arrived):
  chunk 0 at ``ttft_ms``; chunk j at ``ttft_ms + j * chunk_ms``; each chunk carries 1-3 tokens
  (seeded by the prompt text), cumulative ``text`` and cumulative ``completion_tokens``; the final
  chunk has ``finish_reason = {"type": "length", "length": N}``, ``spec_verify_ct`` = number of
  chunks (one verify step per chunk) and ``spec_accept_length``; then ``data: [DONE]``.
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
(uvloop when installed). Prints ``READY <port>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import heapq
import json
import os
import socket
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

TOKEN = "tok "  # 4 bytes of text per token: cumulative text grows like a real stream's
BURST_QUIET_S = 0.2
"""A burst that has not filled releases what it holds after this long without a new request
(a warm-up request, the last wave of a run)."""


@dataclass
class ServerConfig:
    ttft_ms: float = 20.0
    chunk_ms: float = 10.0
    max_tokens_per_chunk: int = 3
    spec: bool = True
    """Add spec_verify_ct / spec_accept_length to the final meta_info."""
    record: bool = True
    """Keep per-request send stamps for ``GET /stamps``."""
    stamps: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pump: Any = None
    _pacer: Any = None
    _burst: Any = None

    def burst(self) -> _Burst:
        if self._burst is None:
            self._burst = _Burst()
        return self._burst

    def pump(self) -> _Pump:
        if self._pump is None:
            self._pump = _Pump()
        return self._pump

    def pacer(self) -> _Pacer:
        if self._pacer is None:
            self._pacer = _Pacer()
        return self._pacer


def chunk_plan(prompt: str, n_tokens: int, max_per_chunk: int) -> list[int]:
    """Tokens per chunk for one request: 1..max_per_chunk, seeded by the prompt text (a small
    LCG: seeding ``random.Random`` per request would cost the server ~15 us)."""
    x = zlib.crc32(prompt.encode())
    plan: list[int] = []
    left = n_tokens
    while left > 0:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        k = min(left, 1 + (x >> 16) % max_per_chunk)
        plan.append(k)
        left -= k
    return plan


def _parse_path(path: str) -> tuple[float | None, float | None, str | None, int | None, str]:
    ttft = chunk = None
    fault = None
    burst = None
    parts = [p for p in path.split("?")[0].split("/") if p]
    while parts and parts[0] in ("sched", "fault", "burst"):
        if parts[0] == "sched" and len(parts) >= 3:
            ttft, chunk = float(parts[1]), float(parts[2])
            parts = parts[3:]
        elif parts[0] == "burst" and len(parts) >= 2:
            burst = int(parts[1])
            parts = parts[2:]
        elif parts[0] == "fault" and len(parts) >= 2:
            fault = parts[1]
            parts = parts[2:]
        else:
            break
    return ttft, chunk, fault, burst, "/" + "/".join(parts)


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
        head = self.buf[:end].decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        self.busy = True
        t_recv = self.t_data  # the request is complete: stamp it here, not in the task
        asyncio.get_running_loop().create_task(self._handle(method, path, body, t_recv))

    def _simple(self, status: str, body: bytes, ctype: str = "application/json") -> None:
        assert self.transport is not None
        self.transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: keep-alive\r\n\r\n".encode()
            + body
        )

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
        ttft_ms, chunk_ms, fault, burst, route = _parse_path(path)
        if method == "GET" and route in ("/health", "/health_generate", "/ready"):
            self._simple("200 OK", b"ok", "text/plain")
            return
        if method == "GET" and route == "/bursts":
            self._simple("200 OK", json.dumps(self.cfg.burst().take()).encode())
            return
        if method == "GET" and route == "/stamps":
            data = json.dumps(self.cfg.stamps).encode()
            self.cfg.stamps = {}
            self._simple("200 OK", data)
            return
        if method != "POST" or route not in ("/generate", "/v1/chat/completions"):
            self._simple("404 Not Found", b'{"error":"not found"}')
            return
        req = json.loads(body)
        chat = route == "/v1/chat/completions"
        if chat:
            prompt = req["messages"][-1]["content"]
            n_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            continuous = bool((req.get("stream_options") or {}).get("continuous_usage_stats"))
        else:
            prompt = req.get("text", "")
            n_tokens = int(req.get("sampling_params", {}).get("max_new_tokens", 16))
            continuous = False
        if fault == "500":
            self._simple("500 Internal Server Error", b'{"error":"injected"}')
            return
        if burst is not None:  # one token per chunk: equal requests end in the same step
            frames = _frames([1] * n_tokens, len(prompt), chat, continuous, self.cfg.spec, None)
            assert self.transport is not None
            await self.cfg.burst().hold(burst, (chunk_ms or 0.0) / 1000.0, self.transport,
                                        frames, t_recv)
            return
        ttft = (self.cfg.ttft_ms if ttft_ms is None else ttft_ms) / 1000.0
        gap = (self.cfg.chunk_ms if chunk_ms is None else chunk_ms) / 1000.0
        await self._stream(prompt, n_tokens, t_recv, ttft, gap, fault, chat, continuous)

    async def _stream(
        self,
        prompt: str,
        n_tokens: int,
        t_recv: float,
        ttft: float,
        gap: float,
        fault: str | None,
        chat: bool,
        continuous: bool,
    ) -> None:
        tr = self.transport
        assert tr is not None
        tr.write(_STREAM_HEAD)
        if fault == "hang":
            await asyncio.sleep(3600)
            return
        plan = chunk_plan(prompt, n_tokens, self.cfg.max_tokens_per_chunk)
        frames = _frames(plan, len(prompt), chat, continuous, self.cfg.spec, fault)
        sent: list[float] = []
        if ttft > 0 or gap > 0:
            await self.cfg.pacer().add(self, frames, sent, t_recv + ttft, gap)
        else:
            await self.cfg.pump().add(self, frames, sent)
        if self.closed:
            return
        if self.cfg.record:
            self.cfg.stamps[prompt] = {"recv": t_recv, "sent": sent, "tokens": plan}


_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: keep-alive\r\n\r\n")


class _Burst:
    """Burst mode (module doc): streams held until ``n`` are held, then streamed in lock step
    (chunk j of every stream in the same loop turn, ``step_s`` apart), so they end together;
    every release stamped."""

    def __init__(self) -> None:
        self.held: list[tuple[asyncio.Transport, list[bytes | None], float,
                              asyncio.Future[None]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.releases: list[dict[str, Any]] = []

    def hold(self, n: int, step_s: float, tr: asyncio.Transport, frames: list[bytes | None],
             t_recv: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.held.append((tr, frames, t_recv, fut))
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if len(self.held) >= n:
            self.release(n, step_s)
        else:
            self.timer = loop.call_later(BURST_QUIET_S, self.release, n, step_s)
        return fut

    def release(self, n: int, step_s: float) -> None:
        held, self.held, self.timer = self.held, [], None
        for tr, *_ in held:
            tr.write(_STREAM_HEAD)
        asyncio.get_running_loop().create_task(self._stream(held, n, step_s))

    async def _stream(self, held: list[Any], n: int, step_s: float) -> None:
        steps = max(len(h[1]) for h in held)
        first = last = perf_counter()
        for j in range(steps):
            if j:  # a step after the previous one, never two at once after a late wake-up
                while (delay := last + step_s - perf_counter()) > 0:
                    await asyncio.sleep(delay)
            first = perf_counter()
            for tr, frames, *_ in held:
                if j < len(frames) and frames[j] is not None and not tr.is_closing():
                    tr.write(frames[j])
            last = perf_counter()
        self.releases.append({"first_write": first, "last_write": last, "size": len(held),
                              "full": len(held) >= n, "recv": [h[2] for h in held]})
        for *_, fut in held:
            if not fut.done():
                fut.set_result(None)

    def take(self) -> list[dict[str, Any]]:
        out, self.releases = self.releases, []
        return out


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

    def add(self, conn: _Conn, frames: list[bytes | None], sent: list[float], first: float,
            gap: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.seq += 1
        heapq.heappush(self.heap, (first, self.seq, [conn, frames, 0, sent, fut, first, gap]))
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
                conn, frames, j, sent, fut, first, gap = st
                if conn.closed:
                    fut.set_result(None)
                    continue
                data = frames[j]
                if data is None:
                    conn.transport.close()
                    fut.set_result(None)
                    continue
                sent.append(perf_counter())
                conn.transport.write(data)
                j += 1
                if j == len(frames):
                    fut.set_result(None)
                    continue
                st[2] = j
                self.seq += 1
                heapq.heappush(heap, (first + j * gap, self.seq, st))
            if not heap:
                break
            self.sleep_until = heap[0][0]
            self.wake = loop.create_future()
            handle = loop.call_at(loop.time() + max(0.0, self.sleep_until - perf_counter()),
                                  _set_done, self.wake)
            await self.wake
            handle.cancel()
            self.sleep_until = float("inf")


class _Pump:
    """Zero-delay streaming: one task writes the next chunk of every active stream per event-loop
    turn (streams interleave like a real server's, without a coroutine switch per chunk)."""

    def __init__(self) -> None:
        self.active: list[list[Any]] = []
        self.new: list[list[Any]] = []
        self.task: asyncio.Task[None] | None = None

    def add(
        self, conn: _Conn, frames: list[bytes | None], sent: list[float]
    ) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.new.append([conn, frames, 0, sent, fut])
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
        return fut

    async def _run(self) -> None:
        while self.active or self.new:
            still = []
            for st in self.active:
                conn, frames, j, sent, fut = st
                if conn.closed:
                    fut.set_result(None)
                    continue
                if conn.paused:
                    still.append(st)
                    continue
                data = frames[j]
                if data is None:
                    conn.transport.close()
                    fut.set_result(None)
                    continue
                sent.append(perf_counter())
                conn.transport.write(data)
                j += 1
                if j == len(frames):
                    fut.set_result(None)
                else:
                    st[2] = j
                    still.append(st)
            self.active = still + self.new
            self.new = []
            await asyncio.sleep(0)


def _frames(plan: list[int], n_prompt: int, chat: bool, continuous: bool, spec: bool,
            fault: str | None) -> list[bytes | None]:
    """The HTTP chunks of one response (None = drop the connection there)."""
    out: list[bytes | None] = []
    done = 0
    for j, k in enumerate(plan):
        done += k
        final = j == len(plan) - 1
        if chat:
            out.append(_chat_frame(k, done, n_prompt, final, continuous))
        else:
            out.append(_native_frame(done, n_prompt, final, len(plan), spec, fault == "abort"))
    if fault == "broken" and len(out) > 1:
        out[1] = _frame(b'data: {"text": "tok tok", "meta_info": {"completion_tokens": \n\n',
                        False)
    if fault == "close" and len(out) > 2:
        out[2] = None
    return out


def _frame(payload: bytes, final: bool) -> bytes:
    """One HTTP/1.1 chunk (plus the terminating zero chunk on the final one)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload) + (b"0\r\n\r\n" if final else b"")


@functools.lru_cache(maxsize=1 << 16)
def _native_frame(done: int, prompt_tokens: int, final: bool, n_chunks: int, spec: bool,
                  abort: bool) -> bytes:
    payload = _native_chunk("0", TOKEN * done, done, prompt_tokens, final, n_chunks, spec, abort)
    if final:
        payload += b"data: [DONE]\n\n"
    return _frame(payload, final)


@functools.lru_cache(maxsize=1 << 16)
def _chat_frame(k: int, done: int, prompt_tokens: int, final: bool, continuous: bool) -> bytes:
    payload = _chat_chunk("0", TOKEN * k, done, prompt_tokens, final, continuous)
    if final:
        payload += _chat_usage("0", done, prompt_tokens) + b"data: [DONE]\n\n"
    return _frame(payload, final)


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _native_chunk(
    rid: str, text: str, done: int, prompt_tokens: int, final: bool, n_chunks: int, spec: bool,
    abort: bool,
) -> bytes:
    """SGLang-native event: cumulative text and completion_tokens; speculation counters on the
    final one (one verify step per chunk)."""
    meta: dict[str, Any] = {"id": rid, "finish_reason": None, "prompt_tokens": prompt_tokens,
                            "completion_tokens": done, "cached_tokens": 0}
    if final:
        meta["finish_reason"] = (
            {"type": "abort", "message": "injected abort"} if abort
            else {"type": "length", "length": done}
        )
        if spec:
            meta["spec_verify_ct"] = n_chunks
            meta["spec_accept_length"] = done / n_chunks
    return _sse({"text": text, "meta_info": meta})


def _chat_chunk(
    rid: str, delta: str, done: int, prompt_tokens: int, final: bool, continuous: bool
) -> bytes:
    """OpenAI chat chunk (usage on every chunk with continuous_usage_stats)."""
    obj: dict[str, Any] = {
        "id": rid, "object": "chat.completion.chunk", "model": "fixed",
        "choices": [{"index": 0, "delta": {"content": delta},
                     "finish_reason": "length" if final else None}],
    }
    if continuous:
        obj["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": done,
                        "total_tokens": prompt_tokens + done}
    return _sse(obj)


def _chat_usage(rid: str, done: int, prompt_tokens: int) -> bytes:
    return _sse({"id": rid, "object": "chat.completion.chunk", "model": "fixed", "choices": [],
                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": done,
                           "total_tokens": prompt_tokens + done}})


async def start_server(
    host: str = "127.0.0.1", port: int = 0, cfg: ServerConfig | None = None
) -> tuple[asyncio.Server, int, ServerConfig]:
    """Start the server on the running loop; returns (server, bound port, config)."""
    config = cfg or ServerConfig()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Conn(config), host, port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    return server, bound, config


async def _main(args: argparse.Namespace) -> None:
    cfg = ServerConfig(ttft_ms=args.ttft_ms, chunk_ms=args.chunk_ms, spec=not args.no_spec,
                       record=not args.no_record)
    server, port, _ = await start_server(args.host, args.port, cfg)
    if not args.keep_gc:  # no collector pauses in the server's own send/receive stamps
        gc.collect()
        gc.freeze()
        gc.disable()
    print(f"READY {port}", flush=True)
    async with server:
        await server.serve_forever()


def launch(cpu: int | None = None, *flags: str) -> tuple[subprocess.Popen[str], str]:
    """Start this server in a process of its own, on CPU ``cpu`` when given and the machine has
    more than one; return the process and its base URL (the port the OS chose, read from the
    server's ``READY <port>`` line). The benchmarks under bench/ all start it this way."""
    pin = cpu is not None and (os.cpu_count() or 1) > 1
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--port", "0", *flags],
        stdout=subprocess.PIPE, text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if pin and cpu is not None else None)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline().split()[1])}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--chunk-ms", type=float, default=10.0)
    p.add_argument("--no-spec", action="store_true")
    p.add_argument("--no-record", action="store_true")
    p.add_argument("--no-uvloop", action="store_true")
    p.add_argument("--keep-gc", action="store_true", help="leave the garbage collector on")
    args = p.parse_args()
    if not args.no_uvloop:
        try:
            import uvloop

            uvloop.run(_main(args))
            return
        except ImportError:
            pass
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
