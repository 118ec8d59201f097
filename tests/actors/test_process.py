"""actors/_process.py's ports: where a server's port is chosen, and how a server's log says one
was taken. The failure messages are the OS's own, raised by real binds."""

from __future__ import annotations

import asyncio
import socket

import pytest

from actors import _process


def _kernel_ephemeral_range() -> tuple[int, int]:
    lo, hi = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
    return int(lo), int(hi)


def test_a_server_port_is_free_and_below_the_ports_outgoing_connections_get():
    lo, _ = _kernel_ephemeral_range()
    assert lo >= 22000  # Linux's default range starts at 32768
    ports = {_process.free_port() for _ in range(20)}
    # above Ray's worker ports (up to 19999), below SGLang's own draws (from 22000)
    assert all(20000 <= p < 22000 for p in ports), ports
    assert len(ports) > 1  # drawn at random, not the same port every time
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_where_the_range_leaves_no_room_the_port_is_the_oss_choice(tmp_path, monkeypatch):
    rng = tmp_path / "ip_local_port_range"
    rng.write_text("20000\t60999\n")
    monkeypatch.setattr(_process, "EPHEMERAL_RANGE", rng)
    lo, hi = _kernel_ephemeral_range()
    port = _process.free_port()
    assert lo <= port <= hi  # the kernel's own ephemeral choice (bound to 0)


def _taken() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def _asyncio_bind_error(port: int) -> OSError:
    """What asyncio's create_server raises (uvicorn logs it as is; aiohttp likewise)."""
    async def bind() -> None:
        await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", port)
    with pytest.raises(OSError) as caught:
        asyncio.run(bind())
    return caught.value


def test_a_failed_bind_is_found_in_the_log_as_uvicorn_and_a_traceback_say_it():
    thief, port = _taken()
    with thief:
        uvicorn_line = f"[2026-12-02 14:06:49] ERROR:    {_asyncio_bind_error(port)}"
        with socket.socket() as s, pytest.raises(OSError) as caught:
            s.bind(("127.0.0.1", port))
        traceback_line = f"OSError: {caught.value}"  # vLLM binds its socket itself and dies
    log = f"INFO: Started server process\n{uvicorn_line}\nINFO: Waiting for application shutdown."
    assert _process.bind_failure(log) == uvicorn_line
    assert _process.bind_failure(log, [port]) == uvicorn_line
    assert _process.bind_failure(log, [port + 1]) is None  # a port not the server's
    died = f"Traceback (most recent call last):\n  File \"api_server.py\"\n{traceback_line}\n\n"
    assert _process.bind_failure(died, last=5) == traceback_line
    # a retried internal port early in a log (vLLM's own warning), then a death of another cause
    retried = ("WARNING Address already in use. Retrying with a new port.\n"
               + "\n".join(f"INFO loading shard {i}" for i in range(5))
               + "\nRuntimeError: Not enough memory")
    assert _process.bind_failure(retried, last=5) is None
    assert _process.bind_failure("INFO: Uvicorn running on http://127.0.0.1:8000") is None
