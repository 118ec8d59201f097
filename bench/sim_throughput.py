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
system, from /proc), i.e. what one core sustains.

Recorded on the shared 2-core development machine (server on CPU 0 with uvloop, client on CPU 1,
256 tokens per request, 1024 requests per cell, goal >= 20,000 tokens/s on one core), command
``.venv/bin/python bench/sim_throughput.py --repeat 2``, two runs per cell (min-max), the
current /generate encoder next to the previous one (text and ids re-encoded per chunk) run
right after it with the same command (load average 1.5-3 during both):

| variant | endpoint | streams | k tok/CPU-s | k tok/s wall | before: k tok/CPU-s | k tok/s wall |
|---|---|---|---|---|---|---|
| baseline | generate | 64 | 68.4-72.2 | 47.2-48.0 | 64.9-66.9 | 61.8-65.1 |
| baseline | generate | 256 | 61.1-67.2 | 50.3-67.3 | 46.8-47.1 | 31.1-34.5 |
| baseline | chat | 64 | 78.3-79.4 | 78.9-80.1 | 70.5-75.5 | 40.6-41.4 |
| baseline | chat | 256 | 63.0-69.4 | 62.9-69.3 | 54.6-56.1 | 27.3-29.0 |
| eagle3 | generate | 64 | 127.9-138.7 | 129.6-140.9 | 100.1-123.7 | 58.1-73.0 |
| eagle3 | generate | 256 | 103.6-117.0 | 102.9-116.6 | 93.0-98.6 | 73.3-87.5 |
| eagle3 | chat | 64 | 157.0-158.9 | 158.8-159.7 | 135.1-158.9 | 108.1-112.7 |
| eagle3 | chat | 256 | 135.1-147.3 | 134.4-145.8 | 116.0-145.6 | 90.0-126.5 |

Tokens per event: 1.00 (baseline), 2.60 (eagle3 generate), 2.52 (eagle3 chat). The chat
encoder did not change; its differences show the run-to-run noise of the shared machine. On the
same machine under heavier load (load average 5-8) an earlier run measured 11,554 wall tok/s for
baseline generate at 64 streams: wall-clock figures there measure the machine, tok/CPU-s the
simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
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
    server_cpu_s: float | None
    """CPU seconds the server process used during the cell (user + system, /proc), or None."""

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def events_s(self) -> float:
        return self.events / self.seconds

    @property
    def tok_cpu_s(self) -> float | None:
        """Tokens per second of server CPU time: what one core sustains, whatever else the
        machine runs (wall-clock tok/s drops when other processes share the server's core)."""
        return self.tokens / self.server_cpu_s if self.server_cpu_s else None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(variant: str, cpu: int | None, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "engines.sim", "--port", str(port), "--sim-time-scale", "0",
           "--max-running-requests", "1024", *(EAGLE3 if variant == "eagle3" else [])]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("simulator did not start: " + proc.stderr.read().decode()
                       if proc.stderr else "")


async def _worker(session: aiohttp.ClientSession, url: str, payload: dict[str, object],
                  left: list[int], totals: list[int], chat: bool) -> None:
    while left[0] > 0:
        left[0] -= 1
        async with session.post(url, json=payload) as resp:
            tail = b""
            events = 0
            async for data in resp.content.iter_any():
                events += data.count(b"\n\n")
                tail = (tail + data)[-600:]
        if chat:  # usage chunk carries the count
            m = list(_TOKENS.finditer(tail))
        else:
            m = list(_TOKENS.finditer(tail))
        totals[0] += int(m[-1].group(1)) if m else 0
        totals[1] += events - 1  # [DONE] is not a token event
        totals[2] += 1


async def drive(port: int, concurrency: int, requests: int, max_new: int,
                endpoint: str) -> tuple[int, int, int, float]:
    chat = endpoint == "chat"
    url = f"http://127.0.0.1:{port}" + ("/v1/chat/completions" if chat else "/generate")
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
        await asyncio.gather(*(_worker(s, url, payload, warm, [0, 0, 0], chat)
                               for _ in range(min(concurrency, 16))))
        left, totals = [requests], [0, 0, 0]
        t0 = time.perf_counter()
        await asyncio.gather(*(_worker(s, url, payload, left, totals, chat)
                               for _ in range(concurrency)))
        return totals[0], totals[1], totals[2], time.perf_counter() - t0


def run_cell(pid: int, port: int, variant: str, endpoint: str, concurrency: int,
             ns: argparse.Namespace) -> Result:
    """One cell. The server's CPU time is read around the whole of ``drive``, whose short
    warm-up (16 requests) is not counted in the tokens, so tok/CPU-s is slightly low."""
    c0 = cpu_seconds(pid)
    tok, ev, done, secs = asyncio.run(
        drive(port, concurrency, ns.requests, ns.max_new_tokens, endpoint))
    c1 = cpu_seconds(pid)
    cpu = c1 - c0 if c0 is not None and c1 is not None else None
    return Result(variant, endpoint, concurrency, done, tok, ev, secs, cpu)


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
    if cpus > 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {ns.client_cpu})
    print("command: " + " ".join([os.path.relpath(sys.executable, REPO),
                                  "bench/sim_throughput.py", *sys.argv[1:]]))
    print(f"server: python -m engines.sim --sim-time-scale 0 (taskset -c {server_cpu}); "
          f"client: aiohttp in this process (CPU {ns.client_cpu}); {ns.max_new_tokens} tokens "
          f"per request, {ns.requests} requests per cell, {cpus} CPUs")
    results: list[Result] = []
    for variant in ns.variants:
        port = free_port()
        proc = start_server(variant, server_cpu, port)
        try:
            for endpoint in ns.endpoints:
                for c in ns.concurrency:
                    for _ in range(ns.repeat):
                        r = run_cell(proc.pid, port, variant, endpoint, c, ns)
                        results.append(r)
                        cpu = f"{r.tok_cpu_s:>10,.0f} tok/CPU-s" if r.tok_cpu_s else ""
                        print(f"  {variant:<9}{endpoint:<9} c={c:<4} {r.tok_s:>10,.0f} tok/s "
                              f"{r.events_s:>10,.0f} events/s {cpu}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    print()
    print(f"| {'variant':<9}| {'endpoint':<9}| {'streams':>7} | {'requests':>8} | "
          f"{'tokens/s':>9} | {'events/s':>9} | {'tok/event':>9} | {'tok/CPU-s':>9} |")
    print(f"|{'-' * 10}|{'-' * 10}|{'-' * 9}|{'-' * 10}|{'-' * 11}|{'-' * 11}|{'-' * 11}|"
          f"{'-' * 11}|")
    for r in results:
        cpu = f"{r.tok_cpu_s:>9,.0f}" if r.tok_cpu_s else f"{'-':>9}"
        print(f"| {r.variant:<9}| {r.endpoint:<9}| {r.concurrency:>7} | {r.requests:>8} | "
              f"{r.tok_s:>9,.0f} | {r.events_s:>9,.0f} | {r.tokens / max(r.events, 1):>9.2f} | "
              f"{cpu} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
