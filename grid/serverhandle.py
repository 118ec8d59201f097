"""A server as the driver sees it: launched through its ServerActor (whose HTTP calls run on
the server's own node) or external (reached directly); starting it with progress from its log,
stopping it, and noticing that it died."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors import probe
from actors.server import ServerActor
from engines.launch import LaunchSpec
from grid.cells import ServerGroup
from grid.ledger import Ledger

PG_CPU = 0.01  # actors reserve a sliver of CPU: placement needs a resource per bundle


class ServerDown(RuntimeError):
    """The server could not be started or died; carries its log tail."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass
class ServerHandle:
    """A running server: launched (through its actor, on its node) or external (direct)."""

    actor: Any
    info: dict[str, Any]
    ledger_id: int | None
    url: str
    headers: dict[str, str]
    sampler: probe.MetricsSampler | None = None

    def flush_cache(self) -> None:
        try:
            if self.actor is None:
                probe.flush_cache(self.url, self.headers)
            else:
                ray.get(self.actor.flush_cache.remote())
        except (probe.ProbeError, ray.exceptions.RayError) as e:
            raise ServerDown(first_line(e)) from None

    def server_info(self) -> dict[str, Any]:
        if self.actor is None:
            return probe.get_json(self.url, "/server_info", self.headers)
        return ray.get(self.actor.server_info.remote())

    def start_metrics(self, interval_s: float | None) -> None:
        if interval_s is None:
            return
        if self.actor is None:
            self.sampler = probe.MetricsSampler(self.url, self.headers, interval_s).start()
        else:
            ray.get(self.actor.start_metrics.remote(interval_s))

    def stop_metrics(self) -> list[tuple[float, str, dict[str, str], float]]:
        if self.actor is None:
            sampler, self.sampler = self.sampler, None
            return sampler.stop() if sampler else []
        return ray.get(self.actor.stop_metrics.remote())


def start_server(group: ServerGroup, spec: LaunchSpec | None, pg: Any, run_dir: Path,
                 ledger: Ledger, echo: Any, prefix: str,
                 on_phase: Callable[[str, str], None] | None = None) -> ServerHandle:
    """Start (or, external, wait for) the group's server; ServerDown if it never serves."""
    config = group.config
    if spec is None:
        url = str(config["engine"]["url"]).rstrip("/")
        _wait_external(url, float(config["engine"]["ready_timeout_s"]), config["engine"])
        return ServerHandle(actor=None, info={"url": url, "argv": [], "env": {}}, ledger_id=None,
                       url=url, headers=_auth(config["engine"]))
    log = run_dir / "logs" / f"server-{group.server_key}.log"
    actor = ServerActor.options(
        num_gpus=group.tp_size, num_cpus=PG_CPU,
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0),
    ).remote(spec, str(log))
    try:
        info = ray.get(actor.start.remote())
    except ray.exceptions.RayError as e:
        ray.kill(actor)
        raise ServerDown(first_line(e)) from None
    ledger_id = ledger.server_started(group.server_key, info["pid"], info["pgid"])
    server = ServerHandle(actor=actor, info=info, ledger_id=ledger_id, url=info["url"],
                     headers=_auth(config["engine"]))
    echo(f"{prefix}: starting server {group.variant} (pid {info['pid']}, GPUs "
             f"{info['cuda_visible_devices'] or '-'}, log {log})")
    deadline = time.monotonic() + spec.ready_timeout_s
    phase = ""
    try:
        while True:
            status = ray.get(actor.poll_ready.remote(2.0))
            if status["phase"] != phase:
                phase = status["phase"]
                if on_phase is not None:  # hook: live progress shows the start-up phase
                    on_phase(group.variant, phase)
                elif phase not in ("starting", "ready"):
                    echo(f"{prefix}: server {phase}")
            if status["ready"]:
                return server
            if time.monotonic() > deadline:
                tail = ray.get(actor.log_tail.remote())
                raise ServerDown(f"server not ready after {spec.ready_timeout_s:.0f} s", tail)
    except ray.exceptions.RayTaskError as e:
        stop_server(ledger, server)
        raise ServerDown(first_line(e), str(getattr(e, "cause", None) or e)) from None
    except ServerDown:
        stop_server(ledger, server)
        raise


def first_line(e: BaseException) -> str:
    """The message of the exception an actor raised, without Ray's traceback wrapping."""
    cause = getattr(e, "cause", None) or e
    lines = [ln for ln in str(cause).splitlines() if ln.strip()]
    return lines[0] if lines else type(cause).__name__


def _wait_external(url: str, timeout_s: float, engine: dict[str, Any]) -> None:
    deadline = time.monotonic() + timeout_s
    headers = _auth(engine)
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=5, headers=headers).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise ServerDown(f"external server {url} did not answer /health within "
                             f"{timeout_s:.0f} s")
        time.sleep(1)


def _auth(engine: dict[str, Any]) -> dict[str, str]:
    key = engine.get("api_key")
    return {"Authorization": f"Bearer {key}"} if key else {}


def stop_server(ledger: Ledger, server: ServerHandle) -> None:
    if server.actor is None:
        return
    try:
        ray.get(server.actor.stop.remote(), timeout=120)
    finally:
        ray.kill(server.actor)
        if server.ledger_id is not None:
            ledger.server_stopped(server.ledger_id)


# --- cells -----------------------------------------------------------------------------------
def server_death(server: ServerHandle) -> tuple[str | None, str | None]:
    """(error, log tail) if the launched server exited, else (None, None)."""
    if server.actor is None:
        return None, None
    code = ray.get(server.actor.exit_code.remote())
    if code is None:
        return None, None
    return (f"server exited with code {code} during the cell",
            ray.get(server.actor.log_tail.remote()))
