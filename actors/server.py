"""ServerActor: owns one engine process on the GPUs Ray gave it.

Ray sets CUDA_VISIBLE_DEVICES for an actor created with num_gpus=N; the process inherits it
(SGLang then runs with --base-gpu-id 0 among the visible devices). The process leads its own
process group and dies with the actor's worker; stop() kills the whole tree and waits until
its ports are free. Never restarted by Ray (max_restarts=0): a silently restarted server would
corrupt a cell. The server binds to `spec.host`; clients on the node reach it there, or at the
node's address when it binds to every interface (0.0.0.0).

Nothing depends on a shared file system (the spec's files and the server's log live in a
temporary folder the actor owns), `engine.python` is checked on the node before launching, and
the API key is appended to the command and replaced by `***` in everything the actor hands
out: docs/cluster.md."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import ray

from actors import _process, probe
from engines.launch import LaunchSpec, startup_timings

LOG_LIMIT_BYTES = 16 * 2**20
"""The most of a server's log stop() returns (its end); SGLang logs stay far below."""
REDACTED = "***"
WILDCARD = "0.0.0.0"
"""The bind address meaning every interface of the node."""


class ServerStartError(RuntimeError):
    """The server exited or never became ready; the message carries the log tail."""


class PortLostError(ServerStartError):
    """The server's log says a port it needed was already in use: another process took it
    between the check before launch and the server's bind. Not the variant's fault; the
    driver starts the server again on new ports."""


def _check_program(program: str) -> None:
    """ServerStartError if the command's program (engine.python) is not on this node."""
    if os.sep in program:
        if not os.access(program, os.X_OK):
            raise ServerStartError(f"{program} does not exist on node {socket.gethostname()} "
                                   "(engine.python must name an interpreter on every GPU node)")
    elif shutil.which(program) is None:
        raise ServerStartError(f"{program} is not on the PATH of node {socket.gethostname()}")


@ray.remote(max_restarts=0, max_concurrency=4)  # type: ignore[call-overload]
class ServerActor:
    def __init__(self, spec: LaunchSpec, access: probe.ServerAccess | None = None) -> None:
        self.spec = spec
        self.access = replace(access or probe.ServerAccess(), api_key=spec.api_key)
        """How every request to the server is made: its key, the run's TLS settings."""
        self.host = spec.host
        self.reach = ray.util.get_node_ip_address() if spec.host == WILDCARD else spec.host
        """Where clients on this node connect to the server."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.files_dir: str | None = None
        self.log_path = Path(tempfile.gettempdir(), "specgrid-server-not-started.log")
        self.ports: list[int] = []
        self.env: dict[str, str] = {}
        self.argv: list[str] = []
        self.phase = "not started"
        self._spawned: float | None = None
        """time.monotonic() when the process was started."""
        self._ready_s: float | None = None
        """Seconds from the start of the process to its first ready answer."""
        self._lock = threading.Lock()
        self._sampler: probe.MetricsSampler | None = None
        self._ports_lost: list[int] = []
        """Ports the server's log says another process took before the server bound them."""

    def start(self, ports: list[int] | None = None) -> dict[str, Any]:
        """Start the process on `ports` (default: free ones chosen now), each checked free
        right before launch; return what was started: started_at (epoch s), pid, pgid, host,
        create_time (the OS's start time of the process), node_id, node_ip, url, argv, env,
        CUDA_VISIBLE_DEVICES, gpu_ids."""
        wanted = 1 + len(self.spec.extra_port_flags)
        ports = list(ports or [_process.free_port(self.host) for _ in range(wanted)])
        if len(ports) != wanted:
            raise ValueError(f"need {wanted} ports, got {ports}")
        for port in ports:
            if not _process.port_is_free(port, self.host):
                raise _process.PortBusyError(f"port {port} on {self.host} is already taken")
        _check_program(self.spec.argv[0])
        argv = self._materialize() + [self.spec.port_flag, str(ports[0])]
        assert self.files_dir is not None
        for flag, port in zip(self.spec.extra_port_flags, ports[1:], strict=True):
            argv += [flag, str(port)]
        if self.spec.api_key:
            argv += [self.spec.api_key_flag, self.spec.api_key]
        env = dict(os.environ)
        env.update(self.spec.env_in(self.files_dir))
        with self._lock:
            started_at = time.time()
            self._spawned, self._ready_s = time.monotonic(), None
            self.proc = _process.spawn(argv, env, self.log_path)
            self.ports, self.env, self.argv = ports, env, argv
            self._ports_lost = []
            self.phase = "starting"
        return {
            "started_at": started_at,
            "pid": self.proc.pid,
            "pgid": os.getpgid(self.proc.pid),
            "host": socket.gethostname(),
            "create_time": _process.create_time(self.proc.pid),
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "url": f"http://{self.reach}:{ports[0]}",
            "argv": [self._hide(arg) for arg in argv],
            "env": env,
            "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES", ""),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        }

    def _materialize(self) -> list[str]:
        """The command, with the spec's files written into a folder this actor owns (where the
        server's log goes too)."""
        self.files_dir = tempfile.mkdtemp(prefix="specgrid-server-")
        self.log_path = Path(self.files_dir, "server.log")
        if not self.spec.files:
            return list(self.spec.argv)
        for name, content in self.spec.files.items():
            Path(self.files_dir, name).write_text(content)
        return self.spec.argv_in(self.files_dir)

    def poll_ready(self, wait_s: float = 2.0) -> dict[str, Any]:
        """Check readiness for up to `wait_s`: {'ready', 'phase', 'exit_code'}. Raises
        ServerStartError with the log tail if the process has exited."""
        deadline = time.monotonic() + wait_s
        url = self._url() + self.spec.health_path
        proc = self.proc
        if proc is None:
            raise ServerStartError("poll_ready before start")
        with self.access.client(url, httpx.Timeout(5.0, connect=1.0)) as client:
            while True:
                code = proc.poll()
                tail = _process.log_tail(self.log_path, lines=200)
                # A failed bind: once the process has exited, its last lines saying so (vLLM
                # dies of it); while it lives, a line naming one of its ports (SGLang's uvicorn
                # logs the failed bind and then waits for its scheduler, never exiting).
                lost = (_process.bind_failure(tail, last=5) if code is not None
                        else _process.bind_failure(tail, self.ports))
                if lost is not None:
                    # the ports the line names; all of them where it names none (vLLM's
                    # traceback ends "OSError: [Errno 98] Address already in use")
                    self._ports_lost = _process.ports_named(lost, self.ports) or list(self.ports)
                    raise PortLostError(f"a port of the server ({', '.join(map(str, self.ports))})"
                                        f" was taken before it bound it: {self._hide(lost)}"
                                        f"\nlog tail:\n{self.log_tail()}")
                if code is not None:
                    # The first line is the cell's error: it ends with why the process said it
                    # stopped; the lines after it are the log tail the ledger keeps.
                    tail = self.log_tail()
                    said = _process.last_lines(tail) or "(its log is empty)"
                    raise ServerStartError(f"server exited with code {code} before it was "
                                           f"ready: {said}\nlog tail:\n{tail}")
                self._update_phase(tail)
                try:
                    if probe.checked(url, lambda: client.get(url)).status_code == 200:
                        if self._ready_s is None and self._spawned is not None:
                            self._ready_s = time.monotonic() - self._spawned
                        self.phase = "ready"
                        return {"ready": True, "phase": self.phase, "exit_code": None}
                except probe.TLSError as e:
                    raise ServerStartError(str(e)) from None
                except httpx.HTTPError:
                    pass
                if time.monotonic() >= deadline:
                    return {"ready": False, "phase": self.phase, "exit_code": None}
                time.sleep(0.1)

    def _update_phase(self, tail: str) -> None:
        """The phase the newest of the spec's log patterns found in `tail` names."""
        if not self.spec.log_phases:
            return
        for phase in self.spec.log_phases:
            if re.search(phase.pattern, tail):
                self.phase = phase.label

    def startup(self) -> dict[str, Any]:
        """How long this start took: `ready_s`, seconds from the process's start to its first
        ready answer (to within a poll, 0.1 s); `phases`, the seconds the engine's own log
        gives its start-up phases (engines/launch.py `startup_timings`), read on this node."""
        return {"ready_s": self._ready_s,
                "phases": startup_timings(_process.log_end(self.log_path, LOG_LIMIT_BYTES),
                                          self.spec.startup_timings)}

    def exit_code(self) -> int | None:
        """None while the process runs."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 40) -> str:
        return self._hide(_process.log_tail(self.log_path, lines))

    def _hide(self, text: str) -> str:
        """`text` with the server's API key replaced."""
        key = self.spec.api_key
        return text.replace(key, REDACTED) if key else text

    def stop(self) -> dict[str, Any]:
        """SIGTERM the tree, SIGKILL after the grace period, wait until the ports are free;
        returns the exit code and the server's log (its last LOG_LIMIT_BYTES)."""
        with self._lock:
            if self.proc is None:
                return {"stopped": False, "log": ""}
            pid = self.proc.pid
            code = self.proc.poll()
            if code is None:
                _process.kill_tree(pid, pid, self.spec.stop_timeout_s, popen=self.proc)
                code = self.proc.poll()
            else:
                _process.kill_tree(pid, pid, 0.5)  # grandchildren of a server that died
            # A port another process took is not the server's to free: waiting would only
            # spend the 30 s before the start on new ports.
            ours = [port for port in self.ports if port not in self._ports_lost]
            ports_free = _process.wait_ports_free(ours, timeout_s=30, host=self.host)
            self.proc = None
            self.phase = "stopped"
            log = self._hide(_process.log_end(self.log_path, LOG_LIMIT_BYTES))
            if self.files_dir is not None:
                shutil.rmtree(self.files_dir, ignore_errors=True)
                self.files_dir = None
        return {"stopped": True, "exit_code": code, "ports_free": ports_free, "log": log}

    # --- the server's own endpoints, reached from its node ---------------------------------
    def _url(self) -> str:
        return f"http://{self.reach}:{self.ports[0]}"

    def flush_cache(self, timeout_s: float = 60.0) -> None:
        if self.spec.endpoints.flush_cache is not None:
            probe.flush_cache(self._url(), self.access, timeout_s,
                              self.spec.endpoints.flush_cache)

    def start_metrics(self, interval_s: float) -> None:
        self._sampler = probe.MetricsSampler(self._url(), self.access, interval_s).start()

    def end_cell(self, probe_timeout_s: float = 5.0) -> dict[str, Any]:
        """Everything the driver records at the end of a cell, in one call: the `/metrics`
        samples taken during it (the last scrape now), the process's exit code (None while it
        runs), and then either its log tail (it exited) or its `/server_info` snapshot and
        whether it still answers `/health` within `probe_timeout_s` (`unresponsive`: why
        not, or None). A server that stopped answering costs this call one `probe_timeout_s`
        (its /health probe; it is not scraped again), never more: the driver bounds the call
        itself too."""
        sampler, self._sampler = self._sampler, None
        code = self.exit_code()
        if code is not None:
            return {"samples": sampler.stop() if sampler else [], "exit_code": code,
                    "info": {}, "log_tail": self.log_tail(), "unresponsive": None}
        if sampler:
            sampler.halt()  # a scrape in flight ends during the probe: the join below is quick
        unresponsive = probe.health(self._url(), self.access, timeout=probe_timeout_s)
        samples = sampler.stop(scrape=unresponsive is None) if sampler else []
        info: dict[str, Any] = {}
        path = self.spec.endpoints.server_info
        if unresponsive is None and path:
            info = probe.get_json(self._url(), path, self.access, timeout=probe_timeout_s)
        return {"samples": samples, "exit_code": None, "info": info, "log_tail": "",
                "unresponsive": unresponsive}
