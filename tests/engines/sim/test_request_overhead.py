"""A profile's per-request overhead (engines/sim/roofline.py ``Efficiency.request_overhead_ms``,
fitted by a twin, docs/twin.md): the simulator's server waits that long, in modelled time,
before it schedules each request, so a twin serves the time its requests spent outside the
engine's steps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from engines.sim.profile import HARDWARE_DIR, PROFILE_DIR
from tests.engines.sim.conftest import LaunchSim


def profile_with_overhead(folder: Path, overhead_ms: float) -> Path:
    """The default profile with its hardware inline and ``overhead_ms`` per request."""
    data = json.loads((PROFILE_DIR / "default.json").read_text())
    hw = json.loads((HARDWARE_DIR / f"{data['hardware']}.json").read_text())
    hw["efficiency"] = {**hw.get("efficiency", {}), "request_overhead_ms": overhead_ms}
    data["hardware"] = hw
    path = folder / f"overhead-{overhead_ms:g}.json"
    path.write_text(json.dumps(data))
    return path


def ttft_s(url: str) -> float:
    """Client time to the first streamed chunk of a one-token completion."""
    body = {"model": "default", "prompt": "hello there", "max_tokens": 1, "stream": True}
    t0 = time.monotonic()
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        next(r.iter_bytes())
        return time.monotonic() - t0


@pytest.mark.slow  # two simulator start-ups and a second of modelled time at 1x
def test_each_request_waits_the_profiles_overhead_before_it_is_scheduled(
        launch_sim: LaunchSim, tmp_path: Path) -> None:
    # modelled time at 1x: 400 ms of overhead is 400 ms of wall time; a one-token request
    # on the default profile is a few milliseconds
    slow = launch_sim(["--sim-profile", str(profile_with_overhead(tmp_path, 400.0)),
                       "--sim-time-scale", "1"])
    plain = launch_sim(["--sim-profile", str(profile_with_overhead(tmp_path, 0.0)),
                        "--sim-time-scale", "1"])
    info = httpx.get(slow.url + "/server_info").json()["sim"]["hardware"]["efficiency"]
    assert info["request_overhead_ms"] == 400.0
    assert min(ttft_s(slow.url) for _ in range(2)) >= 0.4
    assert max(ttft_s(plain.url) for _ in range(2)) < 0.3
