"""A model whose weights leave no room for a KV cache on its GPUs: the simulator refuses to
start, as SGLang does, with the numbers. Expected values from the profiles' published sizes:
Llama-3.3-70B 70.6 B parameters in bf16 plus its 1.2 B-parameter EAGLE-3 head (model
profile), an H100 SXM of 79.6 GiB (hardware profile), mem_fraction_static 0.88 (the default
server profile)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engines.sim.cli import SimArgError, resolve
from engines.sim.memory import memory_fit
from engines.sim.profile import load_profile
from tests.engines.sim.conftest import REPO, free_port

GIB = 2**30
WEIGHTS_70B = (70.6e9 * 2 + 1.2e9 * 2) / GIB  # 133.74 GiB on one GPU
BUDGET_H100 = 79.6 * 0.88  # 70.05 GiB for weights and KV per GPU
KV_TOKEN_70B = 2 * 8 * 128 * 2 * 80  # K and V x 8 KV heads x head_dim 128 x bf16 x 80 layers
REFUSAL = ("Not enough memory: the weights (133.7 GiB per GPU at tp_size 1) leave no room for "
           "the KV cache on h100 (79.6 GiB x mem_fraction_static 0.88 = 70.0 GiB per GPU); it "
           "fits from tp_size 2")


def test_70b_on_one_h100_does_not_fit_and_two_do():
    profile = load_profile(hardware="h100", model="llama3.3-70b")
    one = memory_fit(profile, 1, None)
    assert one.weights_gib == pytest.approx(WEIGHTS_70B) and WEIGHTS_70B > BUDGET_H100
    assert one.kv_tokens == 0 and one.fitting_tp == 2
    assert one.problem() == REFUSAL
    two = memory_fit(profile, 2, None)
    # 66.87 GiB of weights per GPU; the KV of a token is split over the 2 GPUs (8 KV heads)
    free = BUDGET_H100 * GIB - WEIGHTS_70B / 2 * GIB
    assert two.kv_tokens == int(free / (KV_TOKEN_70B / 2)) == 20834
    assert two.problem() is None


def test_a_lower_mem_fraction_static_is_refused_too():
    # tp 2 at 0.8: 79.6 x 0.8 = 63.7 GiB < 66.9 GiB of weights; at tp 4, 33.4 GiB fit, and
    # at tp 2 a share above 66.87 / 79.6 = 0.840 of the GPU would (rounded up: 0.85)
    fit = memory_fit(load_profile(hardware="h100", model="llama3.3-70b"), 2, 0.8)
    assert fit.problem() == (
        "Not enough memory: the weights (66.9 GiB per GPU at tp_size 2) leave no room for the "
        "KV cache on h100 (79.6 GiB x mem_fraction_static 0.8 = 63.7 GiB per GPU); it fits "
        "from tp_size 4 or with mem_fraction_static above 0.85")


def test_resolve_refuses_the_command_line():
    with pytest.raises(SimArgError, match="Not enough memory"):
        resolve(["--sim-hardware", "h100", "--sim-model", "llama3.3-70b", "--tp-size", "1"],
                env={})
    fits = resolve(["--sim-hardware", "h100", "--sim-model", "llama3.3-70b", "--tp-size", "2"],
                   env={})
    assert fits.tp_size == 2


def test_the_simulator_process_exits_non_zero_with_the_memory_line():
    proc = subprocess.run(
        [sys.executable, "-m", "engines.sim", "--sim-hardware", "h100", "--sim-model",
         "llama3.3-70b", "--tp-size", "1", "--port", str(free_port())],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"specgrid-sim: error: {REFUSAL}"]
