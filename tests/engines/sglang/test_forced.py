"""Forced acceptance on SGLang (engines/sglang/forced.py): its SGLANG_SIMULATE_ACC_* environment,
and, where the engine environment exists, that SGLang 0.5.23's own code reads it as asked."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from engines.base import ServerRequest
from engines.forced import forced_acceptance
from engines.sglang.engine import ENGINE

EAGLE3 = {"max_running_requests": 8, "speculative_algorithm": "EAGLE3",
          "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}
SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON")


def _spec(raw: dict, env: dict | None = None, device: str = "cuda"):
    return ENGINE.launch_spec(ServerRequest(
        args=EAGLE3, env=env or {}, model_path="/m", draft_model_path="/d", python="py",
        device=device, forced=forced_acceptance(raw, EAGLE3)))  # type: ignore[arg-type]


def test_a_forced_length_is_sglangs_simulate_environment():
    env = _spec({"length": 2.5}).env
    assert env["SGLANG_SIMULATE_ACC_LEN"] == "2.5"
    assert env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    # the drafter's own tokens unless the variant says otherwise, not SGLang's default 'fixed'
    assert env["SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "real-draft-token"
    assert _spec({"length": 2.5, "token_mode": "fixed"}).env[
        "SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "fixed"
    assert "SGLANG_SIMULATE_ACC_LEN" not in _spec({}).env


def test_rates_and_the_knob_set_by_hand_are_refused():
    with pytest.raises(ValueError, match="SGLang forces a mean accept length only"):
        _spec({"rates": [0.8, 0.6, 0.4]})
    with pytest.raises(ValueError, match="variant.env.SGLANG_SIMULATE_ACC_LEN: force"):
        _spec({}, env={"SGLANG_SIMULATE_ACC_LEN": "3"})


def test_on_the_cpu_sglang_runs_no_speculation_forced_or_not():
    with pytest.raises(ValueError, match="does not run on the CPU"):
        _spec({"length": 2.5}, device="cpu")


@pytest.mark.skipif(not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set")
def test_sglangs_own_code_reads_the_environment_as_forced():
    """SGLang 0.5.23 reads the variables in srt/environ.py and draws each step's length in
    srt/speculative/spec_utils.py (`sample_simulated_acc_len`, `check_simulate_acc_token_mode`);
    with match-expected the draws are 2 or 3 and their mean is 2.5."""
    env = {**os.environ, **_spec({"length": 2.5}).env}
    code = (
        "import json; from sglang.srt.environ import envs\n"
        "from sglang.srt.speculative import spec_utils as s\n"
        "s.check_simulate_acc_token_mode()\n"
        "n = envs.SGLANG_SIMULATE_ACC_LEN.get(); m = envs.SGLANG_SIMULATE_ACC_METHOD.get()\n"
        "draws = [s.sample_simulated_acc_len(n, m, 4) for _ in range(4000)]\n"
        "print(json.dumps([n, m, s.SIMULATE_ACC_TOKEN_MODE, sorted(set(draws)),"
        " sum(draws) / len(draws)]))")
    assert SGLANG_PYTHON
    out = subprocess.run([SGLANG_PYTHON, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.splitlines()[-1]
    length, method, mode, values, mean = json.loads(out)
    assert (length, method, mode, values) == (2.5, "match-expected", "real-draft-token", [2, 3])
    assert mean == pytest.approx(2.5, abs=0.05)  # 4000 draws: sd of the mean 0.008
