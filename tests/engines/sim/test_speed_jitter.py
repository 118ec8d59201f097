"""`speed_jitter`: each server start draws a speed factor in [1 - j, 1 + j] from the server's
seed and its start seed, which multiplies every modelled duration (engines/sim/cli.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import engines
from engines.launch import ServerRequest
from engines.options import OptionError
from engines.sim.cli import resolve, speed_factor
from engines.sim.core import SimEngine
from tests.engines.sim.conftest import REPO


def test_the_factor_stays_in_its_range_and_differs_per_start():
    factors = [speed_factor(0, start, 0.1) for start in range(200)]
    assert all(0.9 <= f <= 1.1 for f in factors)
    assert len(set(factors)) == 200  # every start draws its own
    # Spread over the range, not stuck at one end: 200 uniform draws leave each tenth of it
    # empty with probability 0.9**200 < 1e-9.
    assert min(factors) < 0.92 and max(factors) > 1.08
    assert speed_factor(0, 7, 0.1) == speed_factor(0, 7, 0.1)  # a rerun draws the same
    assert speed_factor(1, 7, 0.1) != speed_factor(0, 7, 0.1)  # the server's seed counts
    assert speed_factor(0, 7, 0.0) == 1.0


def test_the_factor_scales_the_servers_time():
    plain = resolve(["--sim-time-scale", "2"], env={})
    jittered = resolve(["--sim-time-scale", "2", "--sim-speed-jitter", "0.1",
                        "--sim-start-seed", "7"], env={})
    factor = jittered.args["sim"]["speed_factor"]
    assert plain.args["sim"]["speed_factor"] == 1.0 and 0.9 <= factor <= 1.1 and factor != 1.0
    assert jittered.args["sim"]["start_seed"] == 7
    assert SimEngine(plain).time_scale == 2.0
    assert SimEngine(jittered).time_scale == pytest.approx(2.0 * factor)


def test_a_bad_jitter_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "-m", "engines.sim", "--sim-speed-jitter", "1.5"],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip() == "specgrid-sim: error: --sim-speed-jitter must be within [0, 1)"
    for value, message in ((1, "speed_jitter: must be below 1, got 1"),
                           (-0.1, "speed_jitter must be within [0, 1], got -0.1")):
        with pytest.raises(OptionError) as e:
            engines.get("sim").check_options({"speed_jitter": value})
        assert str(e.value) == message


def test_the_launch_passes_a_start_seed_unless_one_is_given():
    sim = engines.get("sim")
    spec = sim.launch_spec(ServerRequest(args={"max_running_requests": 8}, env={}, model_path="m"))
    assert spec.start_seed_flag == "--sim-start-seed"
    assert spec.with_start_seed(12).argv[-2:] == ["--sim-start-seed", "12"]
    fixed = sim.launch_spec(ServerRequest(args={"max_running_requests": 8}, env={}, model_path="m",
                                          options={"start_seed": 5}))
    assert fixed.with_start_seed(12).argv == fixed.argv
    assert fixed.argv[fixed.argv.index("--sim-start-seed") + 1] == "5"
