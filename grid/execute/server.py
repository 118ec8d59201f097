"""A server as the driver sees it, behind one interface with two implementations:
`LaunchedServer` (a ServerActor owns the process on its node; every HTTP call to the server
runs there) and `ExternalServer` (someone else runs it; every HTTP call to it runs in an
ExternalProbe actor on the driver's node). Starting one with progress from its log, stopping
it, and telling whether it is still alive. Any Ray error from a server's actor (dead actor,
lost node) becomes `ServerDown`, so the controller deals with one failure type per server.
No call blocks the driver's thread: each is a step with a bound (grid/execute/steps.py)."""

from __future__ import annotations

import json
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors import _process, probe
from actors.driver_node import KILL_TIMEOUT_S, ExternalProbe, kill_recorded, on_this_node
from actors.server import PortLostError, ServerActor
from engines.detect import Offers
from engines.launch import LaunchSpec
from engines.redact import redact_argv
from grid.execute.steps import CallTimeout, Steps, answers, call, pause
from grid.plan.checks import SERVER_CPU
from grid.store.files import append_text
from grid.store.provenance import recorded_env
from grid.store.rows import ServerFacts

PG_CPU = SERVER_CPU
Samples = list[tuple[float, str, dict[str, str], float]]
PROBE_TIMEOUT_S = 5.0
"""How long the end of a cell waits for the server's /health and /server_info answers."""
CALL_MARGIN_S = 30.0
"""What a call to an actor on the driver's node may take beyond its own timeouts: the start of
the actor's worker process for its first call on a busy node, and Ray's own overhead."""
HEALTH_CALL_S = PROBE_TIMEOUT_S + CALL_MARGIN_S
"""The bound of one /health probe of an external server (its HTTP timeout is 5 s)."""


class ServerDown(RuntimeError):
    """The server could not be started, died, or its actor or node is gone; carries the log
    tail when there is one."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class PortLost(ServerDown):
    """Another process took a port of the server before the server bound it (the actor's
    PortLostError): started again on new ports, not counted against the variant."""


@dataclass(frozen=True)
class CellEnd:
    """What a server tells at the end of a cell, in one call."""

    samples: Samples = field(default_factory=list)
    """Its /metrics samples during the cell (the last scrape taken now)."""
    death: str | None = None
    """Why it is gone (exited, actor died, node lost), or None while it serves."""
    hung: str | None = None
    """Why it no longer answers though it runs (a /health probe or an actor call past its
    bound), or None."""
    info: dict[str, Any] = field(default_factory=dict)
    """Its /server_info snapshot (empty once it is gone or hung)."""
    log_tail: str = ""
    """The end of its log, when it is gone."""

    @property
    def broken(self) -> str | None:
        """Why the server must not serve the group's next cell (it is replaced), or None."""
        return self.death or self.hung


class Server(Protocol):
    """A server as a group's steps see it: every call a step with a bound."""

    url: str
    api_key: str | None
    """The Bearer token its clients send (None: it expects none)."""
    ledger_id: int | None
    """The ledger's record of the process (None: nothing was launched)."""

    def flush_cache(self, timeout_s: float) -> Steps[None]: ...
    def start_metrics(self, interval_s: float | None, timeout_s: float) -> Steps[None]: ...
    def end_cell(self, timeout_s: float) -> Steps[CellEnd]: ...
    def facts(self, end: CellEnd) -> ServerFacts:
        """What a cell records about the server, from what the server said at its end."""
    def stop(self, timeout_s: float) -> Steps[None]: ...


def first_line(e: BaseException) -> str:
    """The message of the exception an actor raised, without Ray's traceback wrapping."""
    cause = getattr(e, "cause", None) or e
    lines = [ln for ln in str(cause).splitlines() if ln.strip()]
    return lines[0] if lines else type(cause).__name__


# --- external ----------------------------------------------------------------------------------
class ExternalServer:
    """A server someone else runs: nothing to start or stop. Every call to it (readiness, death
    checks, detection, flush, server info, metrics) is made by its own ExternalProbe actor on
    the driver's node (actors/driver_node.py), through one `probe.ServerAccess` (the run's TLS
    settings and key), and waited for as a step with a bound: a slow answer holds up no other
    group. A refused certificate is ServerDown at once, with the one line `probe.TLSError`
    gives. Stopping it ends the actor."""

    ledger_id: int | None = None

    def __init__(self, url: str, access: probe.ServerAccess) -> None:
        self.url = url
        self.api_key: str | None = access.api_key
        self.prober: Any = ExternalProbe.options(  # type: ignore[attr-defined]
            scheduling_strategy=on_this_node()).remote(url, access)
        self.offers: Offers | None = None
        """What the server offers, detected once on connect (engines/detect.py)."""

    @classmethod
    def connect(cls, url: str, access: probe.ServerAccess, timeout_s: float,
                endpoint: str = "chat", echo: Callable[[str], None] | None = None
                ) -> Steps[ExternalServer]:
        """Wait until the server answers /health (ServerDown if it does not in time, or at once
        if its certificate is refused), then find out once what it offers; each missing
        optional endpoint is one note through `echo`. ServerDown when it cannot serve the
        workload's `endpoint`. The other groups go on meanwhile."""
        server = cls(url, access)
        try:
            deadline = time.monotonic() + timeout_s
            while (yield from server._ask("health", timeout_s=HEALTH_CALL_S)) is not None:
                if time.monotonic() > deadline:
                    raise ServerDown(f"external server {url} did not answer /health within "
                                     f"{timeout_s:.0f} s")
                yield from pause(1.0)
            server.offers = offers = yield from server._ask(
                "detect", timeout_s=probe.DETECT_TIMEOUT_S + CALL_MARGIN_S)
            for note in offers.notes:
                if echo is not None:
                    echo(f"external server {url}: {note}")
            if endpoint == "generate" and offers.native_generate is False:
                raise ServerDown(f"external server {url} does not serve SGLang's native "
                                 f"/generate (its metrics are "
                                 f"{offers.family or 'neither SGLang nor vLLM'}'s): "
                                 "use workload.endpoint=chat")
        except BaseException:
            ray.kill(server.prober)
            raise
        return server

    def _ask(self, probe_name: str, *args: Any, timeout_s: float) -> Steps[Any]:
        """One call to the probe actor, as a step of at most `timeout_s`: its answer. Its
        exception (a refused certificate, a failed flush: one line), no answer in time and a
        dead actor are ServerDown."""
        what = f"external server {self.url}: the {probe_name} probe"
        try:
            return (yield from call(getattr(self.prober, probe_name).remote(*args), what,
                                    timeout_s))
        except CallTimeout as e:
            raise ServerDown(str(e)) from None
        except ray.exceptions.RayTaskError as e:
            raise ServerDown(first_line(e)) from None
        except ray.exceptions.RayError as e:
            raise ServerDown(f"{what}'s actor died: {first_line(e)}") from None

    def flush_cache(self, timeout_s: float) -> Steps[None]:
        path = self.offers.flush_cache if self.offers else None
        if path is not None:  # none offered: noted once on connect
            # The actor's flush retries for `timeout_s`; its last POST may wait its own timeout.
            yield from self._ask("flush_cache", timeout_s, path, timeout_s=timeout_s
                                 + probe.FLUSH_REQUEST_TIMEOUT_S + CALL_MARGIN_S)

    def start_metrics(self, interval_s: float | None, timeout_s: float) -> Steps[None]:
        if interval_s is not None:
            yield from self._ask("start_metrics", interval_s, timeout_s=timeout_s)

    def end_cell(self, timeout_s: float) -> Steps[CellEnd]:
        """The probe actor's end of the cell (samples, /health, server info), one call of at
        most `timeout_s`; a probe actor that does not answer in time is taken as hung (the
        group connects again, with a new actor, for its next cell)."""
        path = self.offers.server_info if self.offers else None
        try:
            end = yield from self._ask("end_cell", path, PROBE_TIMEOUT_S, timeout_s=timeout_s)
        except ServerDown as e:
            return CellEnd(hung=str(e))
        return CellEnd(list(end["samples"]), death=end["death"], info=dict(end["info"]))

    def facts(self, end: CellEnd) -> ServerFacts:
        return ServerFacts(info=end.info, offers=self.offers.as_dict() if self.offers else {})

    def stop(self, timeout_s: float) -> Steps[None]:
        """End the probe actor (a metrics sampling still running ends with it)."""
        ray.kill(self.prober)
        yield from ()


# --- launched ----------------------------------------------------------------------------------
class LaunchedServer:
    """A server process owned by a ServerActor in the group's placement group."""

    def __init__(self, actor: Any, info: dict[str, Any], api_key: str | None, log_path: Path,
                 variant_env: dict[str, Any]) -> None:
        self.actor = actor
        self.info = info
        self.url: str = info["url"]
        self.api_key = api_key
        self.log_path = log_path
        self.variant_env = variant_env
        self.ledger_id: int | None = None
        self.dead: str | None = None
        """Why the server is gone (it exited, its actor died), once known."""
        self.hung: str | None = None
        """Why the server is taken as hung (a call past its bound, no /health answer)."""
        self.startup: dict[str, Any] = {}
        """How long the start took (ServerActor.startup: `ready_s`, the engine's `phases`)."""

    @classmethod
    def launch(cls, spec: LaunchSpec, *, name: str, tp_size: int, pg: Any, bundle: int,
               log_path: Path, variant_env: dict[str, Any], schedule_timeout_s: float,
               access: probe.ServerAccess | None = None) -> Steps[LaunchedServer]:
        """Start the server's actor (named `name`) in bundle `bundle` of `pg` and its process;
        returns as soon as the process exists (record it, then `wait_ready`). ServerDown if it
        cannot start, or its actor cannot be scheduled within `schedule_timeout_s` (the group's
        node was lost and nothing can take its place). The actor makes every request to the
        server through `access` (the run's TLS settings) with the spec's key."""
        actor = ServerActor.options(  # type: ignore[attr-defined]
            name=name, num_gpus=tp_size, num_cpus=PG_CPU,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=bundle),
        ).remote(spec, access)
        try:
            info = yield from call(actor.start.remote(), "the server's actor",
                                   schedule_timeout_s)
        except CallTimeout:
            ray.kill(actor)
            raise ServerDown(f"the server's actor could not be scheduled within "
                             f"{schedule_timeout_s:.0f} s (its node is gone?)") from None
        except ray.exceptions.RayError as e:
            ray.kill(actor)
            raise ServerDown(first_line(e)) from None
        return cls(actor, info, spec.api_key, log_path, variant_env)

    def wait_ready(self, timeout_s: float, on_phase: Callable[[str], None],
                   call_timeout_s: float) -> Steps[None]:
        """Poll until the server serves, reporting start-up phases from its log (`on_phase`,
        e.g. "loading weights"; not "starting" or "ready"); each poll is a step the controller
        waits on alongside other work, bounded by `call_timeout_s`. ServerDown (with the log
        tail) if the process exits, is not ready in `timeout_s`, or its actor dies or stops
        answering."""
        deadline = time.monotonic() + timeout_s
        phase = ""
        while True:
            try:
                status = yield from call(self.actor.poll_ready.remote(2.0),
                                         "the server's readiness poll", call_timeout_s)
            except ray.exceptions.RayTaskError as e:  # the process exited before it was ready
                cause = getattr(e, "cause", None)
                down = PortLost if isinstance(cause, PortLostError) else ServerDown
                raise down(first_line(e), str(cause or e)) from None
            except (ray.exceptions.RayError, CallTimeout) as e:
                lost = f"server actor lost while starting: {first_line(e)}"
                raise ServerDown(lost, (yield from self.log_tail())) from None
            if status["phase"] != phase:
                phase = status["phase"]
                if phase not in ("starting", "ready"):
                    on_phase(phase)
            if status["ready"]:
                try:  # recorded with every cell it serves
                    self.startup = dict((yield from call(
                        self.actor.startup.remote(), "the server's start-up", call_timeout_s)))
                except (ray.exceptions.RayError, CallTimeout):
                    self.startup = {}  # the next call on the actor says what became of it
                return
            if time.monotonic() > deadline:
                tail = yield from self.log_tail()
                said = _process.last_lines(tail)
                raise ServerDown(f"server not ready after {timeout_s:.0f} s"
                                 + (f"; its log ends: {said}" if said else ""), tail)

    def _call(self, method: str, *args: Any, timeout_s: float) -> Steps[Any]:
        """One call to the server's actor, as a step of at most `timeout_s`. Its exception,
        a dead actor or a lost node is ServerDown; no answer in time is ServerDown too (the
        server is taken as hung: `hung`)."""
        try:
            return (yield from call(getattr(self.actor, method).remote(*args),
                                    f"the server's {method}", timeout_s))
        except CallTimeout as e:
            self.hung = str(e)
            raise ServerDown(self.hung) from None
        except ray.exceptions.RayTaskError as e:
            raise ServerDown(first_line(e)) from None
        except ray.exceptions.RayError as e:
            self.dead = f"server actor died: {first_line(e)}"
            raise ServerDown(self.dead) from None

    def flush_cache(self, timeout_s: float) -> Steps[None]:
        # The actor's own flush gives up a little before the driver does, and says why.
        yield from self._call("flush_cache", max(1.0, timeout_s - PROBE_TIMEOUT_S),
                              timeout_s=timeout_s)

    def start_metrics(self, interval_s: float | None, timeout_s: float) -> Steps[None]:
        if interval_s is not None:
            yield from self._call("start_metrics", interval_s, timeout_s=timeout_s)

    def end_cell(self, timeout_s: float) -> Steps[CellEnd]:
        """The actor's end_cell (actors/server.py): samples, exit code, snapshot or log tail,
        in one call. A server already known dead or hung is not asked again."""
        if self.dead or self.hung:
            return CellEnd(death=self.dead, hung=self.hung)
        try:
            end = yield from self._call("end_cell", PROBE_TIMEOUT_S, timeout_s=timeout_s)
        except ServerDown:
            return CellEnd(death=self.dead, hung=self.hung)
        if end["exit_code"] is not None:
            self.dead = f"server exited with code {end['exit_code']} during the cell"
        elif end["unresponsive"]:
            self.hung = f"server {end['unresponsive']}"
        return CellEnd(list(end["samples"]), death=self.dead, hung=self.hung,
                       info=dict(end["info"]), log_tail=str(end["log_tail"]))

    def log_tail(self) -> Steps[str]:
        """From the actor on the server's node, a step of at most PROBE_TIMEOUT_S ("" once the
        actor, and its node's log, is gone, or when it does not answer in time)."""
        if self.dead is not None and self.dead.startswith("server actor died"):
            return ""
        ((answered, tail),) = yield from answers([self.actor.log_tail.remote()], PROBE_TIMEOUT_S)
        return str(tail) if answered else ""

    def facts(self, end: CellEnd) -> ServerFacts:
        return ServerFacts(
            command=shlex.join(redact_argv(self.info["argv"])),
            env=json.dumps(recorded_env(self.info["env"], self.variant_env)),
            cuda_visible_devices=self.info.get("cuda_visible_devices"),
            gpu_ids=",".join(self.info.get("gpu_ids") or []) or None,
            node_id=self.info.get("node_id"), node_ip=self.info.get("node_ip"),
            hostname=self.info.get("host"), info=end.info,
            started_at=self.info.get("started_at"), startup_s=self.startup.get("ready_s"),
            startup_phases=dict(self.startup.get("phases") or {}))

    def stop(self, timeout_s: float) -> Steps[None]:
        """Stop the process through its actor, write the log it returns into `log_path` (the
        run folder; appended across relaunches), and end the actor. If the actor is gone or
        does not answer in time, a process left on this host is killed by its recorded pid
        (one on another node dies with its actor)."""
        try:
            stopped = yield from call(self.actor.stop.remote(), "stopping the server",
                                      timeout_s)
            append_text(self.log_path, stopped.get("log", ""))
        except (CallTimeout, ray.exceptions.RayError):
            if self.info.get("host") == socket.gethostname():
                # Killed by a task on this node, a step like any other: its grace and reaping
                # take seconds the other groups do not wait out.
                kill = kill_recorded.options(scheduling_strategy=on_this_node()).remote(
                    int(self.info["pid"]), int(self.info["pgid"]), self.info.get("create_time"))
                yield from answers([kill], KILL_TIMEOUT_S + CALL_MARGIN_S)
        finally:
            ray.kill(self.actor)
