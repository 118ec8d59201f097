"""One server group: its placement group (the server's GPUs and one CPU bundle per load
generator, STRICT_PACK on one node), its server and load generators, its cells in order
(grid/execute/cell.py runs each), and how it heals after a failed cell: any exception while
running a cell fails that cell, never the run, and what is replaced after each failure is in
docs/runs.md. Every wait is a step of the group's work (grid/execute/steps.py), so a group
waiting on a server that stopped answering never holds up the others."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors.loadgen.actor import LoadGenActor
from actors.telemetry import TelemetryActor
from grid.execute.cell import CellSettings, LoadGenLost, measure
from grid.execute.progress import Progress
from grid.execute.server import (
    PG_CPU,
    CellEnd,
    ExternalServer,
    LaunchedServer,
    PortLost,
    Server,
    ServerDown,
    first_line,
)
from grid.execute.stall import PING_TIMEOUT_S, LoadTimeout
from grid.execute.steps import Steps, Wait, WaitTimeout, answers, blocking, finishing
from grid.plan.build import Plan
from grid.plan.cells import ServerGroup
from grid.plan.placement import bundle_gpus, server_gpus
from grid.plan.work import PlannedCell
from grid.store import rows
from grid.store.record import RunRecord
from grid.store.results import ResultsWriteError
from grid.store.rows import CellOutcome, ServerFacts

PLACEMENT_TIMEOUT_S = 60.0
PORT_STARTS = 3
"""Starts of one server whose port another process took before it bound it (each on new
ports) before that counts as a failed start."""
STOP_MARGIN_S = 60.0
"""What stopping a server may take beyond its engine's grace period (engine.stop_timeout_s):
waiting for its ports to come free (30 s) and handing its log back."""


class Interrupted(BaseException):
    """The driver got SIGINT/SIGTERM."""


class Run(Protocol):
    """What a group needs of the run that drives it (grid/execute/controller.py)."""

    plan: Plan
    record: RunRecord
    progress: Progress | None
    telemetry_interval_s: float | None
    node_gpus: list[int]
    run_key: str
    parked: dict[str, GroupRun]

    @property
    def settings(self) -> CellSettings: ...
    @property
    def echo(self) -> Callable[[str], None]: ...

    def cell_started(self) -> tuple[int, int]:
        """(this cell's index, the run's cell count), counting it as started."""


class GroupRun:
    """One server group: its placement group, its server and load generators, its cells."""

    def __init__(self, run: Run, group: ServerGroup) -> None:
        self.run = run
        self.group = group
        planned = run.plan.launches[group.server_key]
        self.spec = (planned.with_run_key(run.run_key).with_start_seed(group.start_seed)
                     if planned is not None else None)
        first = run.plan.work(group.cells[0])
        assert first.server is not None
        self.server_settings = first.server
        self.clients = len(first.clients)
        self.client_cpus = first.server.client_cpus
        self.pg: Any = None
        self.unplaceable: str | None = None
        self.server: Server | None = None
        self.loadgens: list[Any] = []
        self.telemetry: Any = None
        self.loadgens_verified = False
        self.failed_starts = 0
        self.last_start_error: ServerDown | None = None
        self.hold = False
        """Park the group (server running) in its controller when its cells are done."""

    def steps(self) -> Steps[None]:
        """The group's whole life: reserve, run its cells in order, release (or, held, stay
        reserved and running for the controller's next `run`). Its release is steps too; only
        a group stopped with the run (interrupted, its work closed by the controller, a
        results folder that cannot be written) releases here and now."""
        try:
            if self.pg is None:  # a parked group is still reserved
                yield from self._reserve()
            for cell in self.group.cells:
                yield from self._run_cell(self.run.plan.work(cell))
        except BaseException:
            self.close()  # the run stops: no group's work goes on, so here and now
            raise
        if self.hold and self.unplaceable is None and self.server is not None:
            self.hold = False
            self.run.parked[self.group.key] = self
        else:
            yield from self.release()

    def close(self) -> None:
        """Release the group here and now (each call bounded). Only where the run is stopping
        and no other group's work runs: interrupted, or the servers a search held when it
        ends (controller.py `Held.release`); the controller releases a parked group it no
        longer needs as steps (`release`) beside the other groups' work."""
        blocking(self.release())

    def release(self) -> Steps[None]:
        """Stop the server, end the load generators and release the placement group: steps
        of the group's work; closed midway, the server's stop is finished here and now."""
        try:
            yield from self._drop_server()
        finally:
            for actor in [*self.loadgens, *([self.telemetry] if self.telemetry else [])]:
                ray.kill(actor)
            self.loadgens, self.telemetry = [], None
            if self.pg is not None:
                try:
                    remove_placement_group(self.pg)
                except Exception as e:  # a lost node's group: nothing left to release here
                    self.run.echo(f"warning: releasing the placement group of "
                                  f"{self.group.variant}: {reason(e)}")
            self.pg = None

    # --- resources -----------------------------------------------------------------------------
    def bundles(self) -> list[dict[str, float]]:
        """The placement group's bundles: the server's GPUs, then each client's CPUs."""
        bundles: list[dict[str, float]] = []
        if self.spec is not None:
            gpus = bundle_gpus(server_gpus(self.group), self.run.node_gpus,
                               self.run.plan.exclusive_node)  # grid.exclusive_node
            bundles.append({"GPU": gpus, "CPU": PG_CPU})
        return bundles + [{"CPU": self.client_cpus}] * self.clients

    def _reserve(self) -> Steps[None]:
        """One STRICT_PACK placement group: the server's GPUs and each client's CPUs on one
        node. It waits while other groups hold what it needs; a group that cannot be placed
        otherwise fails its cells (not the run)."""
        try:
            self.pg = placement_group(self.bundles(), strategy="STRICT_PACK")
            yield Wait([self.pg.ready()], timeout_s=PLACEMENT_TIMEOUT_S, patient=True)
        except WaitTimeout:
            self.unplaceable = (
                f"cannot place {self.group.variant}: {server_gpus(self.group)} GPU(s) plus "
                f"{self.clients} client(s) of {self.client_cpus:g} CPU do not fit on one node "
                "of the Ray cluster")
        except Exception as e:
            self.unplaceable = f"cannot reserve resources for {self.group.variant}: {reason(e)}"

    # --- one cell ------------------------------------------------------------------------------
    def _run_cell(self, work: PlannedCell) -> Steps[None]:
        run, cell = self.run, work.cell
        index, total = run.cell_started()
        prefix = f"[{index + 1}/{total}] {cell.describe()}"
        attempt = run.record.start_attempt(cell)
        if run.progress is not None:
            run.progress.cell_started(index, cell.describe(), work.total, work.unit)
        started = time.time()
        try:
            if self.unplaceable is not None:
                raise ServerDown(self.unplaceable)
            server = yield from self._ensure_server(prefix)
            loadgens = yield from self._ensure_loadgens()
            outcome, end = yield from measure(run.settings, work, attempt, started, server,
                                              loadgens, self._telemetry(), self._on_counts())
            if end.broken:
                yield from self._drop_server()  # replaced for the group's next cell
        except (Interrupted, KeyboardInterrupt):
            run.record.interrupted(cell, "driver interrupted")
            raise
        except ResultsWriteError:
            raise
        except Exception as e:  # one failure fails one cell, never the run
            outcome = yield from self._failed(work, attempt, started, e)
        self._commit(work, attempt, started, outcome)
        if run.progress is not None:
            run.progress.cell_finished(index, cell.describe(), outcome.status,
                                       outcome.row["finished_at"] - outcome.row["started_at"],
                                       rows.describe(outcome.row))
        else:
            run.echo(f"{prefix}: {rows.describe(outcome.row)}")

    def _commit(self, work: PlannedCell, attempt: int, started: float,
                outcome: CellOutcome) -> None:
        record = self.run.record
        try:
            record.commit(work.cell, attempt, outcome)
        except ResultsWriteError:
            raise  # the results folder cannot take files: no cell could be committed
        except Exception as e:  # rows that do not fit the schema: record the failure alone
            record.commit(work.cell, attempt, rows.failed(
                self.run.plan.run_id, work, attempt, started=started, finished=time.time(),
                error=f"results of the cell could not be recorded: {reason(e)}",
                log_tail=None, server=ServerFacts()))

    def _on_counts(self) -> Callable[[dict[str, int]], None] | None:
        """Where the running cell's counts go: a live display, if there is one."""
        progress = self.run.progress
        if progress is None or not progress.live:
            return None
        return lambda c: progress.cell_requests(c["done"], c["tokens"], c["errors"])

    def _telemetry(self) -> Any:
        """The group's TelemetryActor on the server's node (created on first use), or None
        when telemetry is off or nothing was placed."""
        if self.run.telemetry_interval_s is None or self.pg is None:
            return None
        if self.telemetry is None:
            self.telemetry = TelemetryActor.options(  # type: ignore[attr-defined]
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self.pg, placement_group_bundle_index=0)
            ).remote(self.run.telemetry_interval_s)
        return self.telemetry

    def _failed(self, work: PlannedCell, attempt: int, started: float, error: Exception
                ) -> Steps[CellOutcome]:
        """The failed cell's outcome, with what its server can still tell (one bounded
        call, none to a server already known dead or hung); then the group heals."""
        end, facts = CellEnd(), ServerFacts()
        if self.server is not None:
            end = yield from self.server.end_cell(self.run.settings.call_timeout_s)
            facts = self.server.facts(end)
        tail = getattr(error, "log_tail", None) or end.log_tail or None
        finished = time.time()
        said = reason(error)
        if isinstance(error, LoadTimeout):  # the cell's time, in the parts it states
            said += error.recorded(finished - started)
        outcome = rows.failed(self.run.plan.run_id, work, attempt, started=started,
                              finished=finished, error=said, log_tail=tail, server=facts)
        yield from self._heal(error, end)
        return outcome

    # --- healing -------------------------------------------------------------------------------
    def _heal(self, error: Exception, end: CellEnd) -> Steps[None]:
        """After a failed cell: drop a dead or hung server (relaunched when next needed),
        replace dead load generators, leave the living alone. After a LoadTimeout the load
        generators that did not confirm they cancelled the load (`LoadTimeout.stuck`) are
        replaced: a load that may still run in them must not reach the next cell."""
        if end.broken:
            yield from self._drop_server()
        if not self.loadgens:
            return
        if isinstance(error, LoadTimeout):
            alive = [i not in error.stuck for i in range(len(self.loadgens))]
        else:
            alive = yield from _responsive(self.loadgens)
        for i, actor in enumerate(self.loadgens):
            if not alive[i]:
                ray.kill(actor)
                self.loadgens[i] = self._new_loadgen(i)
                self.loadgens_verified = False
                self.run.echo(f"load generator {i} of {self.group.variant} replaced")

    def _ensure_server(self, prefix: str) -> Steps[Server]:
        if self.server is not None:
            return self.server
        limit = self.run.plan.max_server_starts
        if self.failed_starts >= limit and self.last_start_error is not None:
            raise ServerDown(f"server did not start ({self.failed_starts} attempt(s), "
                             f"run.max_server_starts={limit}): {self.last_start_error}",
                             self.last_start_error.log_tail)
        try:
            self.server = yield from self._start_server(prefix)
        except ServerDown as e:
            self.failed_starts += 1
            self.last_start_error = e
            raise
        self.failed_starts = 0
        return self.server

    def _start_server(self, prefix: str) -> Steps[Server]:
        settings = self.server_settings
        access = settings.access  # TLS and key, for every call to the server
        if self.spec is None:
            assert settings.external_url is not None
            endpoint = self.run.plan.work(self.group.cells[0]).endpoint
            return (yield from ExternalServer.connect(
                settings.external_url, access, settings.ready_timeout_s, endpoint,
                self.run.echo))
        record = self.run.record
        log_path = self.run.plan.run_dir / "logs" / f"server-{self.group.server_key}.log"
        for start in range(1, PORT_STARTS + 1):
            server = yield from LaunchedServer.launch(
                self.spec, name=_actor_name("server", self.group),
                tp_size=server_gpus(self.group), pg=self.pg, bundle=0, log_path=log_path,
                variant_env=settings.variant_env, schedule_timeout_s=PLACEMENT_TIMEOUT_S,
                access=access)
            info = server.info
            server.ledger_id = record.server_started(
                self.group.server_key, int(info["pid"]), int(info["pgid"]), info.get("host"),
                info.get("create_time"))
            self.run.echo(f"{prefix}: starting server {self.group.label} (pid {info['pid']}, "
                          f"GPUs {info['cuda_visible_devices'] or '-'}, log at stop: "
                          f"{log_path})")
            try:
                yield from server.wait_ready(self.spec.ready_timeout_s, self._on_phase(prefix),
                                             self.run.settings.call_timeout_s)
            except Exception as e:
                self.server = server
                yield from self._drop_server()
                if not isinstance(e, PortLost) or start == PORT_STARTS:
                    raise
                self.run.echo(f"{prefix}: {e}; starting it again on new ports")
                continue
            except BaseException:  # the run stops: `steps` releases the group, server too
                self.server = server
                raise
            return server
        raise AssertionError("unreachable: the last start returns or raises")

    def _on_phase(self, prefix: str) -> Callable[[str], None]:
        """Where a server's start-up phases (loading weights, capturing CUDA graphs) go."""
        progress = self.run.progress
        if progress is not None:
            return lambda phase: progress.server_phase(self.group.label, phase)
        return lambda phase: self.run.echo(f"{prefix}: server {phase}")

    def _drop_server(self) -> Steps[None]:
        """Stop the group's server (if any); the ledger records the stop either way."""
        server, self.server = self.server, None
        if server is None:
            return
        grace = float(self.spec.stop_timeout_s) if self.spec is not None else 0.0
        try:  # finished here and now if the group is closed meanwhile
            yield from finishing(server.stop(grace + STOP_MARGIN_S))
        except Exception as e:  # stopping is best effort; the ledger still records the stop
            self.run.echo(f"warning: stopping the server of {self.group.variant}: {e}")
        finally:
            if server.ledger_id is not None:
                self.run.record.server_stopped(server.ledger_id)

    def _ensure_loadgens(self) -> Steps[list[Any]]:
        """The group's load generators, created (and seen answering) once; LoadGenLost if one
        cannot be scheduled in time (its node is gone)."""
        if not self.loadgens:
            self.loadgens = [self._new_loadgen(i) for i in range(self.clients)]
            self.loadgens_verified = False
        if not self.loadgens_verified:
            try:
                yield Wait([lg.ping.remote() for lg in self.loadgens],
                           timeout_s=PLACEMENT_TIMEOUT_S)
            except WaitTimeout:
                raise LoadGenLost("a load generator could not be scheduled within "
                                  f"{PLACEMENT_TIMEOUT_S:.0f} s") from None
            self.loadgens_verified = True
        return self.loadgens

    def _new_loadgen(self, i: int) -> Any:
        first = 1 if self.spec is not None else 0
        return LoadGenActor.options(  # type: ignore[attr-defined]
            name=_actor_name(f"loadgen{i}", self.group), num_cpus=self.client_cpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                self.pg, placement_group_bundle_index=first + i)).remote()


def _actor_name(role: str, group: ServerGroup) -> str:
    """`specgrid-server-<key>-r<repeat>-<unique>`: findable in Ray's tools; unique across
    relaunches."""
    return f"specgrid-{role}-{group.server_key[:12]}-r{group.repeat}-{uuid.uuid4().hex[:8]}"


def _responsive(actors: list[Any]) -> Steps[list[bool]]:
    """Which actors answer a ping within PING_TIMEOUT_S (one wait over all of them)."""
    got = yield from answers([actor.ping.remote() for actor in actors], PING_TIMEOUT_S)
    return [ok and bool(value) for ok, value in got]


def reason(error: BaseException) -> str:
    """A failed cell's error: one line naming what failed."""
    if isinstance(error, ServerDown | LoadGenLost):
        return str(error)
    if isinstance(error, ray.exceptions.RayError):
        return f"{type(error).__name__}: {first_line(error)}"
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
