"""ServerActor life cycle against fake engine programs, through real Ray."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import ray

from actors._process import port_is_free
from actors.server import PortLostError, ServerActor
from engines.launch import FILES_DIR, LaunchSpec, LogPhase, ServerRequest, StartupTiming
from engines.sglang.command import build_sim_launch

FAKE = str(Path(__file__).with_name("fake_engine.py"))
pytestmark = pytest.mark.usefixtures("ray_session")


def _actor(tmp_path, mode, *extra, ready_timeout_s=30.0, stop_timeout_s=2.0):
    spec = LaunchSpec(argv=[sys.executable, FAKE, mode, *extra], env={"NCCL_ALGO": "Ring"},
                      ready_timeout_s=ready_timeout_s, stop_timeout_s=stop_timeout_s,
                      log_phases=(LogPhase("fired up", "ready to roll"),))
    return ServerActor.options(num_gpus=2, num_cpus=0).remote(spec)


def _wait_ready(actor, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ray.get(actor.poll_ready.remote(1.0))["ready"]:
            return True
    return False


def test_child_sees_the_gpus_ray_assigned_and_the_variant_env(tmp_path):
    """Two servers of 2 GPUs at once: each process (its environment read from the OS, not from
    what the actor reports) sees 2 GPUs of the session's 8, the two sets are disjoint, and
    the variant's env arrives on top of the node's."""
    actors = [_actor(tmp_path / str(i), "ok") for i in range(2)]
    infos = ray.get([a.start.remote() for a in actors])
    try:
        seen = []
        for actor, info in zip(actors, infos, strict=True):
            assert _wait_ready(actor, 20)
            env = psutil.Process(info["pid"]).environ()
            gpus = env["CUDA_VISIBLE_DEVICES"].split(",")
            assert len(gpus) == 2 and set(gpus) <= {str(g) for g in range(8)}
            assert sorted(gpus) == sorted(info["gpu_ids"])  # Ray's own assignment
            assert env["NCCL_ALGO"] == "Ring"
            assert info["pgid"] == info["pid"]  # leads its own process group
            seen.append(set(gpus))
        assert not seen[0] & seen[1]
    finally:
        results = [ray.get(a.stop.remote()) for a in actors]
        for actor in actors:
            ray.kill(actor)
    assert all(r["ports_free"] for r in results)
    assert not any(psutil.pid_exists(info["pid"]) for info in infos)


def test_startup_records_seconds_to_ready_and_the_logged_phases(tmp_path):
    spec = LaunchSpec(argv=[sys.executable, FAKE, "ok"], startup_timings=(
        StartupTiming(r"loaded its weights in (?P<load_weights>[0-9.]+) s"),))
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    t0 = time.time()
    info = ray.get(actor.start.remote())
    try:
        assert _wait_ready(actor, 20)
        waited = time.time() - t0
        startup = ray.get(actor.startup.remote())
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor)
    assert t0 <= info["started_at"] <= t0 + waited
    # from the process's start to its first ready answer: the interpreter's start at least,
    # never more than the driver waited
    assert 0.0 < startup["ready_s"] <= waited
    assert startup["phases"] == {"load_weights": 0.25}


def test_files_travel_as_content_and_are_removed_on_stop(tmp_path):
    spec = LaunchSpec(argv=[sys.executable, FAKE, "ok", "--config", f"{FILES_DIR}/a.json"],
                      files={"a.json": '{"1": {"candidate_steps": [3]}}'})
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    info = ray.get(actor.start.remote())
    try:
        assert _wait_ready(actor, 20)
        path = info["argv"][info["argv"].index("--config") + 1]
        assert FILES_DIR not in path and Path(path).is_file()
        assert not (tmp_path / "s.log").exists()  # the log stays on the node until stop
    finally:
        stopped = ray.get(actor.stop.remote())
        ray.kill(actor)
    assert f'config {path}: {{"1": {{"candidate_steps": [3]}}}}' in stopped["log"]
    assert not Path(path).exists() and not Path(path).parent.exists()


def test_crash_on_start_fails_fast_with_log_tail(tmp_path):
    actor = _actor(tmp_path, "crash")
    ray.get(actor.start.remote())
    started = time.monotonic()
    with pytest.raises(ray.exceptions.RayTaskError, match="CUDA out of memory"):
        for _ in range(20):
            ray.get(actor.poll_ready.remote(1.0))
    assert time.monotonic() - started < 10
    ray.kill(actor)


def test_a_start_error_ends_with_the_last_lines_the_server_logged(tmp_path):
    """The first line of the error (the cell's error) ends with the log's last non-blank lines,
    blank lines and trailing newlines skipped; the log tail follows it."""
    actor = _actor(tmp_path, "refuse")
    ray.get(actor.start.remote())
    with pytest.raises(ray.exceptions.RayTaskError) as caught:
        for _ in range(20):
            ray.get(actor.poll_ready.remote(1.0))
    ray.kill(actor)
    lines = str(caught.value.cause).splitlines()
    assert lines[0] == ("server exited with code 1 before it was ready: loading weights | "
                        "Traceback (most recent call last): | File \"engine.py\", line 1, in "
                        "<module> | init_memory_pool() | RuntimeError: Not enough memory (fake)")
    assert lines[1] == "log tail:" and "fake engine refuse starting" in lines[2:]


def test_never_ready_is_stopped_cleanly(tmp_path):
    actor = _actor(tmp_path, "never")
    info = ray.get(actor.start.remote())
    assert not _wait_ready(actor, 3)
    ray.get(actor.stop.remote())
    ray.kill(actor)
    assert not psutil.pid_exists(info["pid"])


def test_sigterm_ignored_escalates_to_sigkill(tmp_path):
    actor = _actor(tmp_path, "ignore-sigterm", stop_timeout_s=1.0)
    info = ray.get(actor.start.remote())
    assert _wait_ready(actor, 20)
    result = ray.get(actor.stop.remote())
    ray.kill(actor)
    assert result["exit_code"] == -9
    assert not psutil.pid_exists(info["pid"])
    assert port_is_free(int(info["url"].rsplit(":", 1)[1]))


def test_grandchildren_are_killed(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    actor = _actor(tmp_path, "grandchild", "--pid-file", str(pid_file))
    ray.get(actor.start.remote())
    assert _wait_ready(actor, 20)
    grandchild = int(pid_file.read_text())
    assert psutil.pid_exists(grandchild)
    ray.get(actor.stop.remote())
    ray.kill(actor)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_server_dies_with_its_actor(tmp_path):
    actor = _actor(tmp_path, "ok")
    info = ray.get(actor.start.remote())
    assert _wait_ready(actor, 20)
    ray.kill(actor)  # the actor's worker dies; the server must not outlive it
    gone, _ = psutil.wait_procs([psutil.Process(info["pid"])], timeout=10)
    assert gone


def test_port_taken_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        spec = LaunchSpec(argv=[sys.executable, FAKE, "ok"])
        actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
        with pytest.raises(ray.exceptions.RayTaskError, match=f"port {port} .* already taken"):
            ray.get(actor.start.remote([port]))
        assert ray.get(actor.exit_code.remote()) is None  # nothing was launched
        ray.kill(actor)


def test_a_port_taken_after_launch_is_a_port_lost_error_while_the_server_hangs(tmp_path):
    """Another process binds the port between the check before launch and the server's own
    bind: the server logs the OS's error and hangs (as SGLang's does); poll_ready says the port
    was lost within seconds, not at the ready timeout."""
    go = tmp_path / "go"
    spec = LaunchSpec(argv=[sys.executable, FAKE, "bind-late", "--go", str(go)],
                      ready_timeout_s=300)
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    info = ray.get(actor.start.remote())
    port = int(info["url"].rsplit(":", 1)[1])
    with socket.socket() as thief:
        thief.bind(("127.0.0.1", port))
        thief.listen()
        go.touch()
        started = time.monotonic()
        with pytest.raises(ray.exceptions.RayTaskError) as caught:
            for _ in range(20):
                ray.get(actor.poll_ready.remote(1.0))
        assert time.monotonic() - started < 10
    assert isinstance(caught.value.cause, PortLostError)
    first = str(caught.value.cause).splitlines()[0]
    assert first.startswith(f"a port of the server ({port}) was taken before it bound it: ")
    assert "address already in use" in first.lower()
    assert ray.get(actor.exit_code.remote()) is None  # still hanging: stop() ends it
    ray.get(actor.stop.remote())
    ray.kill(actor)
    assert not psutil.pid_exists(info["pid"])


def test_missing_interpreter_on_the_node_is_a_clear_start_error():
    """engine.python is checked on the server's node before anything is launched."""
    spec = LaunchSpec(argv=["/nonexistent/specgrid/python", "-m", "engines.sim"])
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    with pytest.raises(ray.exceptions.RayTaskError,
                       match="/nonexistent/specgrid/python does not exist on node"):
        ray.get(actor.start.remote())
    assert ray.get(actor.exit_code.remote()) is None  # nothing was launched
    ray.kill(actor)


def test_a_server_bound_beyond_loopback_needs_its_key_and_is_ready_with_it():
    """engine.host=0.0.0.0: the simulator gets the run's key on its command line, readiness
    and the actor's own calls send it, a request without it is refused as SGLang refuses it
    (401), and clients reach the server at the node's address."""
    spec = build_sim_launch(ServerRequest(
        args={"max_running_requests": 8}, env={}, model_path="specgrid/sim-model",
        python=sys.executable, ready_timeout_s=60, stop_timeout_s=5.0, host="0.0.0.0"),
        {"time_scale": 0}).with_run_key("sk-run-key-123")
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    info = ray.get(actor.start.remote())
    try:
        assert _wait_ready(actor, 30)
        url = info["url"]
        assert url.startswith(f"http://{ray.util.get_node_ip_address()}:")
        body = {"text": "hi", "sampling_params": {"max_new_tokens": 2}}
        refused = httpx.post(url + "/generate", json=body)
        assert refused.status_code == 401 and refused.json() == {"error": "Unauthorized"}
        key = {"Authorization": "Bearer sk-run-key-123"}
        assert httpx.post(url + "/generate", json=body, headers=key).status_code == 200
        ray.get(actor.flush_cache.remote())
        end = ray.get(actor.end_cell.remote())  # the server's snapshot, asked with the key
        assert end["exit_code"] is None and end["unresponsive"] is None
        assert end["info"]["api_key"] == "<set>"
        argv = info["argv"]
        assert argv[argv.index("--api-key") + 1] == "***"
        assert "sk-run-key-123" not in repr(info)
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor)


def test_the_key_never_leaves_the_actor_in_a_log(tmp_path):
    """A server that logs its key (SGLang logs its server_args) has it hidden in the log, the
    log tail and a start error the actor hands out."""
    spec = LaunchSpec(argv=[sys.executable, FAKE, "ok"], api_key="sk-in-the-log")
    actor = ServerActor.options(num_gpus=1, num_cpus=0).remote(spec)
    ray.get(actor.start.remote())
    try:
        assert _wait_ready(actor, 20)
        tail = ray.get(actor.log_tail.remote())
    finally:
        stopped = ray.get(actor.stop.remote())
        ray.kill(actor)
    assert "server_args={'api_key': '***'}" in stopped["log"]
    assert "sk-in-the-log" not in stopped["log"] and "sk-in-the-log" not in tail
    crashing = ServerActor.options(num_gpus=1, num_cpus=0).remote(
        LaunchSpec(argv=[sys.executable, FAKE, "crash"], api_key="sk-in-the-log"))
    ray.get(crashing.start.remote())
    with pytest.raises(ray.exceptions.RayTaskError) as failed:
        for _ in range(20):
            ray.get(crashing.poll_ready.remote(1.0))
    ray.kill(crashing)
    assert "CUDA out of memory" in str(failed.value) and "sk-in-the-log" not in str(failed.value)
