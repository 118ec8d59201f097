"""Each --sim-* fault behaves as documented in engines/sim/server.py."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from tests.engines.sim.conftest import LaunchSim, sse_events

BODY = {"text": "Write a Python function.", "sampling_params": {"max_new_tokens": 8,
                                                                 "ignore_eos": True}}


def test_crash_after_requests(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-crash-after-requests", "2", "--sim-time-scale", "0"])
    for _ in range(2):
        assert httpx.post(sim.url + "/generate", json=BODY).status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.post(sim.url + "/generate", json=BODY, timeout=5)
    assert sim.proc.wait(5) == 1  # os._exit(1): abrupt, no drain
    assert "simulated crash" in sim.log()
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.url + "/health", timeout=1)


def test_hang_after_requests(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-hang-after-requests", "1", "--sim-time-scale", "0"])
    assert httpx.post(sim.url + "/generate", json=BODY).status_code == 200
    # request 2: the connection is accepted but never gets a single byte
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as s:
        payload = json.dumps(BODY).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        s.settimeout(0.7)
        with pytest.raises(TimeoutError):
            s.recv(1)
    # from then on even health checks hang (a wedged server), yet the process lives
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(sim.url + "/health", timeout=0.7)
    assert sim.proc.poll() is None
    assert "simulated hang" in sim.log()


def test_error_rate(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-error-rate", "1.0", "--sim-time-scale", "0"])
    r = httpx.post(sim.url + "/generate", json=BODY)
    assert r.status_code == 500 and "error" in r.json()
    r = httpx.post(sim.url + "/v1/chat/completions",
                   json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 500 and r.json()["object"] == "error"
    assert httpx.get(sim.url + "/health").status_code == 200


def test_error_rate_fraction_is_deterministic(launch_sim: LaunchSim) -> None:
    def codes(seed: str) -> list[int]:
        sim = launch_sim(["--sim-error-rate", "0.5", "--sim-seed", seed, "--sim-time-scale", "0"])
        out = [httpx.post(sim.url + "/generate", json=BODY).status_code for _ in range(40)]
        sim.stop()
        return out

    a, b = codes("7"), codes("7")
    assert a == b  # same seed, same arrival order, same faults
    assert 8 <= a.count(500) <= 32 and set(a) == {200, 500}


def test_malformed_rate(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-malformed-rate", "1.0", "--sim-time-scale", "0.01"])
    body = {**BODY, "stream": True, "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
    r = httpx.post(sim.url + "/generate", json=body)
    assert r.status_code == 200
    events = sse_events(r.content)
    broken = []
    for i, e in enumerate(events[:-1]):
        try:
            json.loads(e)
        except json.JSONDecodeError:
            broken.append(i)
    assert len(broken) == 1 and 0 < broken[0] < len(events) - 2  # mid-stream, then it goes on
    assert events[broken[0]].startswith('{"text":"')
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["meta_info"]["completion_tokens"] == 20
