"""How many streamed tokens per second one simulator process sustains.

The simulator must never be the bottleneck of a benchmark run. This starts
``python -m engines.sim --sim-time-scale 0`` (no modelled step cost: the server streams as fast
as its event loop can) pinned to one CPU core, and drives it from this process pinned to another
core with many concurrent closed-loop streams (aiohttp, byte-level SSE parsing: the client must
be cheaper than the server for the number to mean anything). Reported: completed output tokens
per second, SSE events per second and tokens per event (> 1 with speculation, or when the
client falls behind and the server coalesces chunks, as SGLang does).

    .venv/bin/python bench/sim_throughput.py                       # the default table
    .venv/bin/python bench/sim_throughput.py --concurrency 64 256 --requests 2000

Besides wall-clock tok/s (which falls whenever other processes share the server's core), each
cell reports tok/CPU-s: output tokens per second of the server process's own CPU time (user +
system, from /proc), i.e. what one core sustains. Recorded numbers: docs/simulator.md
"Simulator throughput".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from dataclasses import dataclass

import aiohttp
import psutil
from _common import ROOT, launch_sim, pin, stopping

EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
_TOKENS = re.compile(rb'"completion_tokens":(\d+)')


@dataclass
class Result:
    variant: str
    endpoint: str
    concurrency: int
    requests: int
    tokens: int
    events: int
    seconds: float
    server_cpu_s: float
    """CPU seconds the server process used during the cell (user + system, /proc)."""

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def events_s(self) -> float:
        return self.events / self.seconds

    @property
    def tok_cpu_s(self) -> float:
        """Tokens per second of server CPU time: what one core sustains, whatever else the
        machine runs (wall-clock tok/s drops when other processes share the server's core);
        NaN for a cell shorter than /proc's resolution."""
        return self.tokens / self.server_cpu_s if self.server_cpu_s else float("nan")


async def _worker(session: aiohttp.ClientSession, url: str, payload: dict[str, object],
                  left: list[int], totals: list[int]) -> None:
    while left[0] > 0:
        left[0] -= 1
        async with session.post(url, json=payload) as resp:
            tail = b""
            events = 0
            async for data in resp.content.iter_any():
                events += data.count(b"\n\n")
                tail = (tail + data)[-600:]
        m = list(_TOKENS.finditer(tail))  # the last count (chat: its usage chunk's)
        totals[0] += int(m[-1].group(1)) if m else 0
        totals[1] += events - 1  # [DONE] is not a token event
        totals[2] += 1


async def drive(server: str, concurrency: int, requests: int, max_new: int,
                endpoint: str) -> tuple[int, int, int, float]:
    chat = endpoint == "chat"
    url = server + ("/v1/chat/completions" if chat else "/generate")
    if chat:
        payload: dict[str, object] = {
            "model": "m", "messages": [{"role": "user", "content": "Write a Python function."}],
            "max_tokens": max_new, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    else:
        payload = {"text": "Write a Python function.", "stream": True,
                   "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(600)) as s:
        warm = [min(concurrency, 16)]
        await asyncio.gather(*(_worker(s, url, payload, warm, [0, 0, 0])
                               for _ in range(min(concurrency, 16))))
        left, totals = [requests], [0, 0, 0]
        t0 = time.perf_counter()
        await asyncio.gather(*(_worker(s, url, payload, left, totals)
                               for _ in range(concurrency)))
        return totals[0], totals[1], totals[2], time.perf_counter() - t0


def run_cell(pid: int, url: str, variant: str, endpoint: str, concurrency: int,
             ns: argparse.Namespace) -> Result:
    """One cell. The server's CPU time is read around the whole of ``drive``, whose short
    warm-up (16 requests) is not counted in the tokens, so tok/CPU-s is slightly low."""
    server = psutil.Process(pid)
    c0 = sum(server.cpu_times()[:2])  # user + system
    tok, ev, done, secs = asyncio.run(
        drive(url, concurrency, ns.requests, ns.max_new_tokens, endpoint))
    return Result(variant, endpoint, concurrency, done, tok, ev, secs,
                  sum(server.cpu_times()[:2]) - c0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--requests", type=int, default=1024, help="per cell")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--variants", nargs="+", default=["baseline", "eagle3"])
    ap.add_argument("--endpoints", nargs="+", default=["generate", "chat"])
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each cell")
    ns = ap.parse_args(argv)
    cpus = os.cpu_count() or 1
    server_cpu = ns.server_cpu if cpus > 1 else None
    pin(ns.client_cpu)
    print("command: " + " ".join([os.path.relpath(sys.executable, ROOT),
                                  "bench/sim_throughput.py", *sys.argv[1:]]))
    print(f"server: python -m engines.sim --sim-time-scale 0 (taskset -c {server_cpu}); "
          f"client: aiohttp in this process (CPU {ns.client_cpu}); {ns.max_new_tokens} tokens "
          f"per request, {ns.requests} requests per cell, {cpus} CPUs")
    results: list[Result] = []
    for variant in ns.variants:
        proc, server = launch_sim(["--sim-time-scale", "0", "--max-running-requests", "1024",
                                   *(EAGLE3 if variant == "eagle3" else [])], server_cpu)
        with stopping(proc):
            for endpoint in ns.endpoints:
                for c in ns.concurrency:
                    for _ in range(ns.repeat):
                        r = run_cell(proc.pid, server, variant, endpoint, c, ns)
                        results.append(r)
                        print(f"  {variant:<9}{endpoint:<9} c={c:<4} {r.tok_s:>10,.0f} tok/s "
                              f"{r.events_s:>10,.0f} events/s {r.tok_cpu_s:>10,.0f} tok/CPU-s",
                              flush=True)
    print()
    print(f"| {'variant':<9}| {'endpoint':<9}| {'streams':>7} | {'requests':>8} | "
          f"{'tokens/s':>9} | {'events/s':>9} | {'tok/event':>9} | {'tok/CPU-s':>9} |")
    print(f"|{'-' * 10}|{'-' * 10}|{'-' * 9}|{'-' * 10}|{'-' * 11}|{'-' * 11}|{'-' * 11}|"
          f"{'-' * 11}|")
    for r in results:
        print(f"| {r.variant:<9}| {r.endpoint:<9}| {r.concurrency:>7} | {r.requests:>8} | "
              f"{r.tok_s:>9,.0f} | {r.events_s:>9,.0f} | {r.tokens / max(r.events, 1):>9.2f} | "
              f"{r.tok_cpu_s:>9,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
