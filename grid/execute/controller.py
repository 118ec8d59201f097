"""The run controller: for each server group, reserve its node's resources (one STRICT_PACK
placement group: the server's GPUs and one bundle per load generator), start its server and
LoadGenActors there, run its cells in order and hand each outcome to the run record.

Failure isolation, as Ray Tune's FailureConfig treats trials: any exception while running a
cell (a dead ServerActor or LoadGenActor, a lost node, a Ray task error, a bad spec) fails that
cell with the reason and the server's log tail, never the run. After a failure the group heals
itself: a dead load generator is replaced (the server is left alone), a dead server is relaunched
for the group's next cell, and after `run.max_server_starts` consecutive failed starts the
group's remaining cells fail with the reason. Only an interruption of the driver (signal, Ctrl-C)
or a results folder that cannot be written stops the run. A cell's load is bounded by its
progress, polled from its load generators while it runs (grid/execute/stall.py): no token and no
completed request for its stall bound, or past run.cell_timeout_s, fails the cell (LoadTimeout).

Each group is one `GroupRun` holding its own placement group, server and load generators; its
work is a generator of steps, each yielding the Ray refs it waits for (a server start poll, the
load of a cell, its placement). The controller runs up to `grid.max_parallel_servers` groups at
once and advances whichever is ready, with one `ray.wait` over the running work of all groups
(as Ray Tune's controller does with trials); the cells of one group stay in order on their
server. Short calls (flushing the cache, a metrics scrape) stay plain `ray.get`s."""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from secrets import token_urlsafe
from typing import Any, TypeVar

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors.loadgen.actor import START_MARGIN_S, LoadGenActor
from actors.probe import ServerAccess
from actors.telemetry import TelemetryActor
from grid.execute.cluster import node_resources
from grid.execute.progress import Progress
from grid.execute.server import (
    PG_CPU,
    ExternalServer,
    LaunchedServer,
    PortLost,
    Server,
    ServerDown,
    Wait,
    WaitTimeout,
    first_line,
)
from grid.execute.stall import PING_TIMEOUT_S, LoadTimeout, Stall, StallWatch
from grid.plan.build import Plan
from grid.plan.cells import Cell, ServerGroup, group_by_server
from grid.plan.placement import bundle_gpus, fits_together, server_gpus
from grid.plan.specs import at_url, external_url
from grid.plan.workloads import cell_columns, request_columns, workload_records
from grid.store import rows
from grid.store.record import RunRecord
from grid.store.results import ResultsWriteError
from grid.store.rows import CellOutcome, ServerFacts

PLACEMENT_TIMEOUT_S = 60.0
PORT_STARTS = 3
"""Starts of one server whose port another process took before it bound it (each on new
ports) before that counts as a failed start."""
T = TypeVar("T")
Steps = Generator[Wait, None, T]
"""A group's work: yields what it waits for, returns its result."""


class Interrupted(BaseException):
    """The driver got SIGINT/SIGTERM."""


class LoadGenLost(RuntimeError):
    """A load generator's actor died (or its node) while it drove a cell."""


@dataclass
class Controller:
    plan: Plan
    record: RunRecord
    max_error_rate: float
    metrics_interval_s: float | None
    echo: Callable[[str], None] = print
    progress: Progress | None = None
    """Live progress (execute/progress.py): cell and server start-up events; None = plain lines."""
    telemetry_interval_s: float | None = None
    """GPU telemetry (NVML) sampled during each cell by one TelemetryActor per group."""
    node_gpus: list[int] = field(default_factory=list)
    """GPUs of each node of the Ray cluster (execute/cluster.py); sizes exclusive placements."""
    run_key: str = field(default_factory=lambda: token_urlsafe(32), repr=False)
    """This run's API key for servers that bind beyond loopback without engine.api_key
    (LaunchSpec.with_run_key); it reaches the ServerActors and LoadGenActors through Ray, in
    their specs, and is never recorded."""
    hold_last: bool = False
    """Keep servers (with their placements and load generators) running after `run` for a
    next `run` that uses the same servers: an adaptive search's next step
    (grid/execute/search.py) extends running servers instead of starting them again. Every
    group of the run is kept when all of them fit on the cluster at once (`fits_together`:
    two servers on an 8-GPU node with grid.exclusive_node=false), else the last one; groups
    a next `run` does not use are stopped before it starts; `release` stops the rest."""
    total: int = 0
    started: int = 0
    parked: dict[str, GroupRun] = field(default_factory=dict, repr=False)

    def run(self, cells: Sequence[Cell]) -> None:
        """Run `cells` (the ones still to do), grouped by server, groups in grid order, up to
        `plan.max_parallel_servers` groups at a time."""
        self.total, self.started = len(cells), 0
        if self.plan.workloads is not None:  # the prompts the run sends, with their sources
            self.record.record_workloads(workload_records(self.plan.workloads.sets))
        groups = group_by_server(cells)
        for key in [k for k in self.parked if k not in {g.server_key for g in groups}]:
            self.parked.pop(key).close()  # its GPUs go to the servers this run starts
        runs: list[GroupRun] = []
        for group in groups:
            parked = self.parked.pop(group.server_key, None)
            if parked is not None:
                parked.group = group
                runs.append(parked)
            else:
                runs.append(GroupRun(self, group))
        if runs and self.hold_last and self.plan.max_parallel_servers == 1:
            # All of them only where they fit at once: a parked server the cluster has no
            # room beside would block the next group's reservation.
            together = fits_together([r.bundles() for r in runs], node_resources())
            for run in runs if together else runs[-1:]:
                run.hold = True
        waiting = deque(runs)
        active: dict[GroupRun, tuple[Steps[None], Wait, float | None]] = {}
        try:
            while waiting or active:
                while waiting and len(active) < self.plan.max_parallel_servers:
                    run = waiting.popleft()
                    self._advance(active, run, run.steps())
                if not active:
                    continue
                refs = [ref for _, wait, _ in active.values() for ref in wait.refs]
                ray.wait(refs, num_returns=1, timeout=1.0)
                now = time.monotonic()
                for run, (steps, wait, deadline) in list(active.items()):
                    ready, _ = ray.wait(wait.refs, num_returns=len(wait.refs), timeout=0)
                    if len(ready) == len(wait.refs):
                        self._advance(active, run, steps)
                    elif deadline is not None and now > deadline:
                        # Patient: another group holds what this one needs and will free
                        # it. Only while some group is doing something other than waiting
                        # for resources itself: patient waits alone would wait forever.
                        if wait.patient and any(not w.patient for r, (_, w, _) in
                                                active.items() if r is not run):
                            active[run] = (steps, wait, now + (wait.timeout_s or 0.0))
                        else:
                            self._advance(active, run, steps, WaitTimeout())
        finally:
            # Interrupted, or a results folder that cannot be written: every running group
            # stops its server and load generators (its running cell is marked interrupted).
            for steps, _, _ in active.values():
                steps.close()

    def release(self) -> None:
        """Stop the servers `hold_last` kept running, if any."""
        parked, self.parked = self.parked, {}
        for run in parked.values():
            run.close()

    def _advance(self, active: dict[GroupRun, tuple[Steps[None], Wait, float | None]],
                 run: GroupRun, steps: Steps[None], error: BaseException | None = None) -> None:
        """Resume a group's work until it waits again (or ends)."""
        active.pop(run, None)
        try:
            wait = steps.throw(error) if error is not None else next(steps)
        except StopIteration:
            return
        deadline = None if wait.timeout_s is None else time.monotonic() + wait.timeout_s
        active[run] = (steps, wait, deadline)


class GroupRun:
    """One server group: its placement group, its server and load generators, its cells."""

    def __init__(self, ctl: Controller, group: ServerGroup) -> None:
        self.ctl = ctl
        self.group = group
        planned = ctl.plan.launches[group.server_key]
        self.spec = planned.with_run_key(ctl.run_key) if planned is not None else None
        self.clients = int(group.config["load"]["clients"])
        self.client_cpus = float(group.config["load"]["client_cpus"])
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
        reserved and running for the controller's next `run`)."""
        held = False
        try:
            if self.pg is None:  # a parked group is still reserved
                yield from self._reserve()
            for cell in self.group.cells:
                yield from self._run_cell(cell)
            held = self.hold and self.unplaceable is None and self.server is not None
        finally:
            if held:
                self.hold = False
                self.ctl.parked[self.group.server_key] = self
            else:
                self.close()

    def close(self) -> None:
        """Stop the server and load generators and release the placement group."""
        self._close()
        self.pg = None

    # --- resources -----------------------------------------------------------------------------
    def bundles(self) -> list[dict[str, float]]:
        """The placement group's bundles: the server's GPUs, then each client's CPUs."""
        bundles: list[dict[str, float]] = []
        if self.spec is not None:
            gpus = bundle_gpus(server_gpus(self.group), self.ctl.node_gpus,
                               self.ctl.plan.exclusive_node)  # grid.exclusive_node
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

    def _close(self) -> None:
        self._drop_server()
        for actor in [*self.loadgens, *([self.telemetry] if self.telemetry else [])]:
            ray.kill(actor)
        self.loadgens, self.telemetry = [], None
        if self.pg is not None:
            try:
                remove_placement_group(self.pg)
            except Exception as e:  # a lost node's group: nothing left to release here
                self.ctl.echo(f"warning: releasing the placement group of "
                              f"{self.group.variant}: {reason(e)}")

    # --- one cell ------------------------------------------------------------------------------
    def _run_cell(self, cell: Cell) -> Steps[None]:
        ctl = self.ctl
        ctl.started += 1
        index = ctl.started - 1
        prefix = f"[{ctl.started}/{ctl.total}] {cell.describe()}"
        attempt = ctl.record.start_attempt(cell)
        if ctl.progress is not None:
            unit = "rounds" if cell.cell_id in ctl.plan.conversation_loads else "requests"
            ctl.progress.cell_started(index, cell.describe(), ctl.plan.requests_of(cell), unit)
        started = time.time()
        try:
            outcome = yield from self._measure(cell, attempt, started, prefix)
        except (Interrupted, KeyboardInterrupt):
            ctl.record.interrupted(cell, "driver interrupted")
            raise
        except ResultsWriteError:
            raise
        except Exception as e:  # one failure fails one cell, never the run
            outcome = self._failed(cell, attempt, started, e)
            self._heal(e)
        try:
            ctl.record.commit(cell, attempt, outcome)
        except ResultsWriteError:
            raise  # the results folder cannot take files: no cell could be committed
        except Exception as e:  # rows that do not fit the schema: record the failure alone
            outcome = rows.failed(ctl.plan.run_id, cell, attempt, started=started,
                                  finished=time.time(), error=f"results of the cell could not "
                                  f"be recorded: {reason(e)}", log_tail=None,
                                  server=ServerFacts())
            ctl.record.commit(cell, attempt, outcome)
        if ctl.progress is not None:
            ctl.progress.cell_finished(index, cell.describe(), outcome.status,
                                       outcome.row["finished_at"] - outcome.row["started_at"],
                                       rows.describe(outcome.row))
        else:
            ctl.echo(f"{prefix}: {rows.describe(outcome.row)}")

    def _measure(self, cell: Cell, attempt: int, started: float, prefix: str
                 ) -> Steps[CellOutcome]:
        if self.unplaceable is not None:
            raise ServerDown(self.unplaceable)
        server = yield from self._ensure_server(prefix)
        loadgens = yield from self._ensure_loadgens()
        server.flush_cache()
        # The load's bounds, from here to its end, warm-up included (grid/execute/stall.py).
        plan = self.ctl.plan
        watch = StallWatch(loadgens, Stall(
            float(cell.config["load"]["request_timeout_s"]), plan.longest_wait_s(cell),
            plan.cell_timeout_s, started=time.monotonic()))
        conversations = plan.conversation_loads.get(cell.cell_id)
        # Barrier (actors/loadgen/actor.py): every client connected and warmed up, then one
        # shared start a moment ahead, so the clients' schedules line up and no client
        # measures while another still warms up.
        if conversations is not None:  # workload.kind=conversations (grid/plan/conversations.py)
            refs = [lg.prepare_conversations.remote(spec) for lg, spec in
                    zip(loadgens, at_url(conversations, server.url, server.api_key),
                        strict=True)]
        else:
            specs = at_url(plan.loads[cell.cell_id], server.url, server.api_key)
            refs = [lg.prepare.remote(spec) for lg, spec in zip(loadgens, specs, strict=True)]
        yield from self._wait_watched(refs, watch, display=False)
        _collect(refs)
        server.start_metrics(self.ctl.metrics_interval_s)
        telemetry = self._telemetry()
        if telemetry is not None:
            ray.get(telemetry.start.remote())
        try:
            watch.window_opens()
            start_at = time.time() + START_MARGIN_S
            refs = [(lg.run if conversations is None else lg.run_conversations).remote(start_at)
                    for lg in loadgens]
            yield from self._wait_watched(refs, watch, display=True)
            results = _collect(refs)
        finally:
            samples = _stop_metrics(server)
            gpu_rows = ray.get(telemetry.stop.remote()) if telemetry is not None else []
        death = server.death()
        measured: Callable[..., CellOutcome] = (rows.measured if conversations is None
                                                else rows.measured_conversations)
        outcome = measured(
            self.ctl.plan.run_id, cell, attempt, started=started, finished=time.time(),
            results=results, samples=samples, server=server.facts(), server_death=death,
            log_tail=server.log_tail() if death else None,
            max_error_rate=self.ctl.max_error_rate)
        self._add_workload_columns(cell, outcome)
        outcome.telemetry = rows.telemetry_rows(self.ctl.plan.run_id, cell, attempt, gpu_rows)
        if death:
            self._drop_server()  # relaunched for the group's next cell
        return outcome

    def _wait_watched(self, refs: list[Any], watch: StallWatch, display: bool) -> Steps[None]:
        """Wait for a cell's load generators (`refs`: their prepare or their load), polling
        their progress every PROGRESS_INTERVAL_S; LoadTimeout when the watch's bound passes.
        `display`: hand the counts to a live display (the measured window's)."""
        progress = self.ctl.progress if display and self.ctl.progress \
            and self.ctl.progress.live else None
        while True:
            try:
                yield Wait(refs, timeout_s=watch.wait_s())
                return
            except WaitTimeout:
                counts = watch.poll()
                if progress is not None and counts is not None:
                    progress.cell_requests(counts["done"], counts["tokens"], counts["errors"])
                watch.check()

    def _telemetry(self) -> Any:
        """The group's TelemetryActor on the server's node (created on first use), or None
        when telemetry is off or nothing was placed."""
        if self.ctl.telemetry_interval_s is None or self.pg is None:
            return None
        if self.telemetry is None:
            self.telemetry = TelemetryActor.options(  # type: ignore[attr-defined]
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self.pg, placement_group_bundle_index=0)
            ).remote(self.ctl.telemetry_interval_s)
        return self.telemetry

    def _add_workload_columns(self, cell: Cell, outcome: CellOutcome) -> None:
        """The workload's alignment with the drafter (cell) and each prompt's source and
        similarity to the drafter's training data (requests): grid/plan/workloads.py."""
        plan = self.ctl.plan.workloads
        if plan is None:
            return
        alignment = plan.alignments.get(cell.cell_id)
        sources = plan.sources(cell.workload_name)
        outcome.row.update(cell_columns(alignment))
        for request in outcome.requests:
            request.update(request_columns(sources, alignment, request["prompt_id"]))

    def _failed(self, cell: Cell, attempt: int, started: float, error: Exception
                ) -> CellOutcome:
        tail = getattr(error, "log_tail", None) or None
        facts = ServerFacts()
        if self.server is not None:
            try:
                facts = self.server.facts()
                tail = tail or (self.server.log_tail() if self.server.death() else None)
            except Exception:  # the facts of a failing server are best effort
                pass
        return rows.failed(self.ctl.plan.run_id, cell, attempt, started=started,
                           finished=time.time(), error=reason(error), log_tail=tail,
                           server=facts)

    # --- healing -------------------------------------------------------------------------------
    def _heal(self, error: Exception) -> None:
        """After a failed cell: drop a dead server (relaunched when next needed), replace dead
        load generators, leave the living alone. After a LoadTimeout every load generator is
        replaced: the load that passed its bound may still be running in them, and must not
        reach the next cell."""
        if self.server is not None and self.server.death() is not None:
            self._drop_server()
        if self.loadgens:
            alive = ([False] * len(self.loadgens) if isinstance(error, LoadTimeout)
                     else _responsive(self.loadgens))
            for i, actor in enumerate(self.loadgens):
                if not alive[i]:
                    ray.kill(actor)
                    self.loadgens[i] = self._new_loadgen(i)
                    self.loadgens_verified = False
                    self.ctl.echo(f"load generator {i} of {self.group.variant} replaced")

    def _ensure_server(self, prefix: str) -> Steps[Server]:
        if self.server is not None:
            return self.server
        limit = self.ctl.plan.max_server_starts
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
        config = self.group.config
        engine = config["engine"]
        access = ServerAccess.from_config(config)  # TLS and key, for every call to the server
        if self.spec is None:
            url = external_url(engine)
            assert url is not None
            return ExternalServer.connect(url, access, float(engine["ready_timeout_s"]),
                                          config["workload"]["endpoint"], self.ctl.echo)
        record = self.ctl.record
        log_path = self.ctl.plan.run_dir / "logs" / f"server-{self.group.server_key}.log"
        for start in range(1, PORT_STARTS + 1):
            server = LaunchedServer.launch(
                self.spec, name=_actor_name("server", self.group.server_key),
                tp_size=server_gpus(self.group), pg=self.pg, bundle=0, log_path=log_path,
                variant_env=config["variant"]["env"], schedule_timeout_s=PLACEMENT_TIMEOUT_S,
                access=access)
            info = server.info
            server.ledger_id = record.server_started(
                self.group.server_key, int(info["pid"]), int(info["pgid"]), info.get("host"),
                info.get("create_time"))
            self.ctl.echo(f"{prefix}: starting server {self.group.variant} (pid {info['pid']}, "
                          f"GPUs {info['cuda_visible_devices'] or '-'}, log at stop: {log_path})")
            try:
                yield from server.wait_ready(self.spec.ready_timeout_s, self._on_phase(prefix))
            except BaseException as e:
                self.server = server
                self._drop_server()
                if not isinstance(e, PortLost) or start == PORT_STARTS:
                    raise
                self.ctl.echo(f"{prefix}: {e}; starting it again on new ports")
                continue
            return server
        raise AssertionError("unreachable: the last start returns or raises")

    def _on_phase(self, prefix: str) -> Callable[[str], None]:
        """Where a server's start-up phases (loading weights, capturing CUDA graphs) go."""
        progress = self.ctl.progress
        if progress is not None:
            return lambda phase: progress.server_phase(self.group.variant, phase)
        return lambda phase: self.ctl.echo(f"{prefix}: server {phase}")

    def _drop_server(self) -> None:
        server, self.server = self.server, None
        if server is None:
            return
        try:
            server.stop()
        except Exception as e:  # stopping is best effort; the ledger still records the stop
            self.ctl.echo(f"warning: stopping the server of {self.group.variant}: {e}")
        finally:
            if server.ledger_id is not None:
                self.ctl.record.server_stopped(server.ledger_id)

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
            name=_actor_name(f"loadgen{i}", self.group.server_key), num_cpus=self.client_cpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                self.pg, placement_group_bundle_index=first + i)).remote()


def _actor_name(role: str, server_key: str) -> str:
    """`specgrid-server-<key>-<unique>`: findable in Ray's tools; unique across relaunches."""
    return f"specgrid-{role}-{server_key[:12]}-{uuid.uuid4().hex[:8]}"


def _collect(refs: list[Any]) -> list[Any]:
    """The clients' results once all have finished (the controller waited for all of them, so
    none is left driving load into the next cell); LoadGenLost if one's actor died."""
    results, lost = [], []
    for ref in refs:
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayActorError as e:
            lost.append(first_line(e))
    if lost:
        raise LoadGenLost(f"load generator died: {lost[0]}")
    return results


def _stop_metrics(server: Server) -> list[tuple[float, str, dict[str, str], float]]:
    try:
        return server.stop_metrics()
    except ServerDown:  # the server went away during the cell: no final scrape
        return []


def _responsive(actors: list[Any]) -> list[bool]:
    """Which actors answer a ping within PING_TIMEOUT_S (one ray.wait over all of them)."""
    refs = [actor.ping.remote() for actor in actors]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PING_TIMEOUT_S)
    alive = []
    for ref in refs:
        try:
            alive.append(ref in ready and bool(ray.get(ref)))
        except ray.exceptions.RayError:
            alive.append(False)
    return alive


def reason(error: BaseException) -> str:
    """A failed cell's error: one line naming what failed."""
    if isinstance(error, ServerDown | LoadGenLost):
        return str(error)
    if isinstance(error, ray.exceptions.RayError):
        return f"{type(error).__name__}: {first_line(error)}"
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
