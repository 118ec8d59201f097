"""Owning a server process: ports, spawning into its own process group, killing the whole tree.
Plain functions over pids and sockets; no Ray."""

from __future__ import annotations

import ctypes
import os
import random
import re
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1


class PortBusyError(RuntimeError):
    """A port the server needs is already taken."""


SERVER_PORTS = (20000, 22000)
"""Where a server's port is drawn from (the end excluded): above Ray's worker ports (10002-19999,
its default min/max_worker_port), below the ports SGLang draws for its own children to bind
later (22000-29999, sglang/srt/utils/network.py get_free_port_below_ephemeral) and below the
range the OS hands to outgoing connections and to binds of port 0 (32768 up by default)."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""Where Linux says which ports it hands to outgoing connections (32768-60999 by default)."""
ADDRESS_IN_USE = re.compile(r"address already in use", re.IGNORECASE)
"""How a server's log says a port it needed was taken: the OS's strerror for EADDRINUSE, in the
message of Python's socket.bind and asyncio's create_server alike (uvicorn, aiohttp)."""


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default, also where the file is missing


def free_port(host: str = "127.0.0.1", tries: int = 50) -> int:
    """A port free right now, drawn at random from SERVER_PORTS. A server binds its port only
    once its engine is up (SGLang on a CPU: about 30 s after its start), and within that window
    any outgoing connection on the node, from any process, may be given an ephemeral port: the
    OS's own choice (binding port 0) is one, and was seen taken that way before SGLang bound
    it. Where none of `tries` draws is free (or the OS's ephemeral range starts below
    SERVER_PORTS), the OS's choice."""
    low, high = SERVER_PORTS[0], min(SERVER_PORTS[1], _ephemeral_start())
    for _ in range(tries if high > low else 0):
        port = random.randrange(low, high)
        if port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def bind_failure(log: str, ports: Sequence[int] = (), last: int | None = None) -> str | None:
    """The first line of a server's log saying a port was already in use, else None: among
    its `last` non-blank lines where given (how a process that died of it ends), and naming one
    of `ports` where given. Both engines log such lines on the way to success too (vLLM's
    "Address already in use. Retrying with a new port." for its internal ports)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return next((line for line in lines[-last if last else 0:]
                 if ADDRESS_IN_USE.search(line) and (not ports or ports_named(line, ports))),
                None)


def ports_named(line: str, ports: Sequence[int]) -> list[int]:
    """Those of `ports` that `line` names (as a number of its own, not inside a longer one)."""
    return [port for port in ports if re.search(rf"\b{port}\b", line)]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def wait_ports_free(ports: Sequence[int], timeout_s: float, host: str = "127.0.0.1") -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(port_is_free(p, host) for p in ports):
            return True
        time.sleep(0.1)
    return all(port_is_free(p, host) for p in ports)


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGKILL when the parent (the actor's worker)
    # dies, so an actor crash cannot leak a server that holds GPUs.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen:
    """Start `argv` in a new process group (so the tree can be signalled as one), output to
    `log_path`, dying with its parent."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            list(argv), env=dict(env), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
        )
    finally:
        log.close()


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are still alive."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int, pgid: int | None, grace_s: float,
              popen: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group and every descendant, wait up to `grace_s`, then SIGKILL the
    group and whatever is still alive (children that left the group included). Pass `popen`
    when `pid` is our child, so it is reaped through it and keeps its exit code."""
    tree = process_tree(pid)
    _signal_group(pgid, signal.SIGTERM)
    for proc in tree:
        _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    if popen is not None:
        tree = [p for p in tree if p.pid != pid]
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    _, alive = psutil.wait_procs(tree, timeout=max(0.0, deadline - time.monotonic()))
    root_alive = popen is not None and popen.poll() is None
    if alive or root_alive or _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        for proc in alive:
            _signal(proc, signal.SIGKILL)
        if popen is not None:
            popen.kill()
            popen.wait(timeout=10)
        psutil.wait_procs(alive, timeout=5)


def _signal(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def _signal_group(pgid: int | None, sig: int) -> None:
    if pgid is None or pgid <= 1:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int | None) -> bool:
    if pgid is None or pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_recorded(pid: int, pgid: int, create_time: float | None = None) -> bool:
    """Kill a server recorded by an earlier driver if it is still alive. Servers lead their own
    process group (pid == pgid), so a reused pid of an unrelated process is left alone, and so
    is a process whose start time differs from the recorded `create_time` (psutil's, seconds);
    group members whose leader already died are killed through the group. True if anything
    was."""
    if create_time is not None and not same_process(pid, create_time):
        return False
    try:
        if os.getpgid(pid) == pgid:
            kill_tree(pid, pgid, grace_s=5)
            return True
    except ProcessLookupError:
        pass
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        return True
    return False


def create_time(pid: int) -> float | None:
    """The process's start time as the OS reports it (None if it is gone)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.NoSuchProcess:
        return None


def same_process(pid: int, recorded: float) -> bool:
    """Whether `pid` is still the process that started at `recorded` (a gone process is not)."""
    now = create_time(pid)
    return now is not None and abs(now - recorded) < 0.05


def log_end(path: Path, limit_bytes: int) -> str:
    """The last `limit_bytes` of a log ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(log_end(path, 64 * 1024).splitlines()[-lines:])


def last_lines(text: str, lines: int = 5, chars: int = 800) -> str:
    """The end of a log as one line: its last `lines` non-blank lines (a traceback's frame and
    its exception, an engine's refusal), stripped and joined with " | ", at most `chars`
    characters (the end kept: that is where a process says why it stopped)."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    joined = " | ".join(kept)
    return joined if len(joined) <= chars else "..." + joined[-(chars - 3):]
