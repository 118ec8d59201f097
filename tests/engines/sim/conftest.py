"""Launch real ``python -m engines.sim`` processes for the simulator's tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
_CLEAN_PREFIXES = ("NCCL_", "SGLANG_", "SGL_", "CUDA_DEVICE_MAX_CONNECTIONS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SimProcess:
    """One running simulator: its URL, process and log file."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def start_sim(args: Sequence[str] = (), env: Mapping[str, str] | None = None,
              wait: str = "health", timeout: float = 20.0) -> SimProcess:
    """Start the simulator on a free port; ``wait`` = "health" (200), "listen" or "none"."""
    port = free_port()
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEAN_PREFIXES)}
    run_env.update(env or {})
    run_env["PYTHONUNBUFFERED"] = "1"
    fd, log_name = tempfile.mkstemp(prefix="sim-", suffix=".log")
    log_file = os.fdopen(fd, "wb")
    cmd = [sys.executable, "-m", "engines.sim", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=run_env, stdout=log_file, stderr=subprocess.STDOUT)
    log_file.close()
    sim = SimProcess(proc, port, Path(log_name), list(args))
    if wait == "none":
        return sim
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simulator exited with {proc.returncode}:\n{sim.log()}")
        try:
            r = httpx.get(sim.url + "/health", timeout=3.0)  # a 1-token generation, ~1 s
            if wait == "listen" or r.status_code == 200:
                return sim
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    sim.stop()
    raise RuntimeError(f"simulator not ready after {timeout}s:\n{sim.log()}")


LaunchSim = Callable[..., SimProcess]
"""Type of the ``launch_sim`` fixture."""


@pytest.fixture
def launch_sim() -> Iterator[LaunchSim]:
    """Factory fixture: ``launch_sim(args, env=..., wait=...)``; every process is stopped."""
    procs: list[SimProcess] = []

    def launch(args: Sequence[str] = (), **kw: Any) -> SimProcess:
        sim = start_sim(args, **kw)
        procs.append(sim)
        return sim

    yield launch
    for p in procs:
        p.stop()
        p.log_path.unlink(missing_ok=True)


def sse_events(raw: bytes) -> list[str]:
    """SSE ``data:`` payloads of a complete response body, split on blank lines."""
    out = []
    for block in raw.split(b"\n\n"):
        if not block:
            continue
        assert block.startswith(b"data: "), block[:80]
        out.append(block[len(b"data: "):].decode())
    return out


def sse_json(raw: bytes) -> list[dict[str, Any]]:
    """Parsed JSON events, ``[DONE]`` excluded (asserted to be last)."""
    events = sse_events(raw)
    assert events and events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


async def _stream_one(session: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url + "/generate", json=body) as resp:
        assert resp.status == 200, await resp.text()
        raw = await resp.read()
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    return json.loads(events[-2])["meta_info"]


def run_generate(url: str, bodies: Sequence[dict[str, Any]],
                 concurrent: bool) -> tuple[float, list[dict[str, Any]]]:
    """Stream ``bodies`` to /generate, all at once or one after another, with aiohttp.
    Returns (wall seconds from the first send to the last byte, final meta_info of each)."""
    import asyncio

    import aiohttp

    async def run() -> tuple[float, list[dict[str, Any]]]:
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn,
                                         timeout=aiohttp.ClientTimeout(total=120)) as session:
            await session.get(url + "/health")  # open one connection before the clock starts
            t0 = time.perf_counter()
            if concurrent:
                metas = await asyncio.gather(*(_stream_one(session, url, b) for b in bodies))
            else:
                metas = [await _stream_one(session, url, b) for b in bodies]
            return time.perf_counter() - t0, list(metas)

    return asyncio.run(run())
