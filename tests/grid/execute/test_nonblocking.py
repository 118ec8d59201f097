"""Nothing blocks the controller's loop (grid/execute/steps.py): an external server's probes run
in its own actor, a parked server the next run does not use is released as steps beside the
new groups' work, and a failed start's cleanup (the log tail, the kill of a process whose
actor hangs) is steps too. Real Ray, real simulator, real Parquet, but for the controller's
unit test (stand-in groups, pauses only)."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import ray

import grid.execute.controller as controller
from actors import _process
from actors.driver_node import KILL_TIMEOUT_S
from grid.execute.controller import Controller, Held
from grid.execute.server import CALL_MARGIN_S, PROBE_TIMEOUT_S, LaunchedServer, ServerDown
from grid.execute.steps import Steps, WaitTimeout, blocking, pause
from grid.loader import load_cells
from tests.engines.sim.conftest import start_sim
from tests.grid.execute.paced_servers import held_front
from tests.grid.execute.smoke_runs import run_smoke

HOLD_S = 25.0
"""How long the relay holds the first cache-flush POST: one external group's detection of what
its server offers (the POST's own timeout is 30 s, probe.FLUSH_REQUEST_TIMEOUT_S). The other
group connects and runs its two cells of 6 short requests meanwhile: seconds."""


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_an_external_server_slow_to_answer_a_probe_holds_up_no_other_group(tmp_path: Path):
    # Two groups (repeats 0 and 1) on one simulator behind the relay, both at once; the first
    # detection's flush POST is held. Before the probes ran in an actor, that POST blocked the
    # driver's thread, so no cell of the other group could be recorded while it was held.
    sim = start_sim()
    try:
        with held_front(sim.port, b"POST /flush_cache ", HOLD_S) as (url, held):
            outcome, out = run_smoke(tmp_path, "engine=external", f"engine.options.url={url}",
                                     "grid.axes.repeat=[0,1]", "grid.max_parallel_servers=2",
                                     "load.client_cpus=0.5")
    finally:
        sim.stop()
    assert outcome.exit_code == 0, out
    cells = load_cells(outcome.run_dir)
    assert len(cells) == 4 and (cells.status == "done").all()
    held_at, passed_at = held
    finished = sorted(cells.finished_at)
    # the run's own record: a cell finished while the other group's probe was held
    assert any(held_at < at < passed_at for at in finished), (held_at, passed_at, finished)


# --- a parked server released as steps ---------------------------------------------------------
class _Parked:
    """A parked group the next run does not use: its release asks, waits a moment, and is
    done; each noted in `log`."""

    def __init__(self, log: list[str]) -> None:
        self.log, self.key, self.run = log, "old", None

    def release(self) -> Steps[None]:
        self.log.append("release asked")
        yield from pause(0.01)
        self.log.append("released")

    def close(self) -> None:
        blocking(self.release())


def test_a_parked_server_is_released_beside_the_next_groups_work(monkeypatch):
    log: list[str] = []

    class NewGroup:
        """The one group of the next run: its work is noted, and waits for nothing."""

        def __init__(self, run: Any, group: Any) -> None:
            self.group, self.hold = group, False

        def steps(self) -> Steps[None]:
            log.append("new group ran")
            return
            yield

    monkeypatch.setattr(controller, "GroupRun", NewGroup)
    monkeypatch.setattr(controller, "group_by_server",
                        lambda cells: [SimpleNamespace(key="new")])
    plan = SimpleNamespace(workloads=None, max_parallel_servers=1)
    ctl = Controller(plan, record=None, max_error_rate=0.0,
                     metrics_interval_s=None, held=Held("key", {"old": _Parked(log)}))
    ctl.run([])
    # max_parallel_servers=1, and still the new group ran while the old server was stopping
    assert log == ["release asked", "new group ran", "released"]
    assert ctl.parked == {}


# --- a failed start's cleanup as steps ---------------------------------------------------------
@ray.remote(num_cpus=0)
class _Hung:
    """A ServerActor that answers nothing: every call waits (until the actor is killed)."""

    def _never(self) -> None:
        threading.Event().wait()

    def poll_ready(self, wait_s: float) -> None:
        self._never()

    def log_tail(self) -> None:
        self._never()

    def stop(self) -> None:
        self._never()


def _launched(tmp_path: Path, pid: int = 0, create_time: float | None = None) -> LaunchedServer:
    info = {"url": "http://127.0.0.1:1", "host": socket.gethostname(), "pid": pid, "pgid": pid,
            "create_time": create_time}
    return LaunchedServer(_Hung.remote(), info, None, tmp_path / "server.log", {})


@pytest.mark.usefixtures("ray_session")
def test_a_start_whose_actor_hangs_waits_for_its_log_tail_as_a_step(tmp_path):
    server = _launched(tmp_path)
    steps = server.wait_ready(60, lambda phase: None, call_timeout_s=1.0)
    assert next(steps).timeout_s == 1.0  # the readiness poll
    tail = steps.throw(WaitTimeout())  # not answered: the log tail is asked, as a step
    assert tail.timeout_s == PROBE_TIMEOUT_S and len(tail.refs) == 1
    with pytest.raises(ServerDown) as down:
        steps.throw(WaitTimeout())
    assert str(down.value) == ("server actor lost while starting: the server's readiness poll "
                               "did not answer within 1 s")
    assert down.value.log_tail == ""
    ray.kill(server.actor)


@pytest.mark.usefixtures("ray_session")
def test_a_server_whose_actor_hangs_is_killed_by_a_task_waited_for_as_a_step(tmp_path):
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)  # leads its group
    reaper = threading.Thread(target=proc.wait, daemon=True)  # reaped as soon as it dies
    reaper.start()
    server = _launched(tmp_path, proc.pid, _process.create_time(proc.pid))
    steps = server.stop(1.0)
    assert next(steps).timeout_s == 1.0  # the actor's stop
    kill = steps.throw(WaitTimeout())  # not answered: the process is killed from this node
    assert kill.timeout_s == KILL_TIMEOUT_S + CALL_MARGIN_S and len(kill.refs) == 1
    ray.wait(kill.refs, timeout=kill.timeout_s)
    with pytest.raises(StopIteration):
        steps.send(None)
    reaper.join(timeout=10)
    assert proc.returncode == -signal.SIGTERM
