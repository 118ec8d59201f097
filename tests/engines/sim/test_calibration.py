"""Calibration through the HTTP API: wall-clock throughput of a real simulator process with a
real client, for the four scenarios of the default profile (engines/sim/profile.py defines them:
coding prompts of 128 tokens, 256 output tokens with ignore_eos, temperature 0; single stream =
2 requests back to back; saturated = 64 requests at once, no --max-running-requests).

The servers run at a fraction of modelled time (--sim-time-scale); measured tok/s x scale is the
modelled tok/s. The test knows the published targets, not the model's constants.
"""

from __future__ import annotations

import pytest

from engines.sim.calibrate import chat_prompt, coding_prompt
from tests.engines.sim.conftest import LaunchSim, run_generate

# Wall-clock figures of a simulator at time scale 1: they need a quiet machine (-m slow, and
# `serial`: run one at a time, never beside other tests).
pytestmark = [pytest.mark.slow, pytest.mark.serial]

TARGETS = {  # tok/s of the published 8-GPU measurement (profiles/default.json)
    ("baseline", "single"): 89.0,
    ("baseline", "saturated"): 773.0,
    ("eagle3", "single"): 96.1,
    ("eagle3", "saturated"): 354.0,
}
VARIANTS = {
    "baseline": [],
    "eagle3": ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
}
SCALE = {"single": 0.25, "saturated": 0.2}


def body(i: int) -> dict[str, object]:
    return {"text": coding_prompt(i), "stream": True,
            "sampling_params": {"max_new_tokens": 256, "ignore_eos": True, "temperature": 0}}


@pytest.mark.parametrize("variant", ["baseline", "eagle3"])
def test_calibration_through_http(launch_sim: LaunchSim, variant: str) -> None:
    for kind, n, concurrent in (("single", 2, False), ("saturated", 64, True)):
        sim = launch_sim([*VARIANTS[variant], "--sim-time-scale", str(SCALE[kind])])
        wall, metas = run_generate(sim.url, [body(i) for i in range(n)], concurrent)
        sim.stop()
        assert all(m["completion_tokens"] == 256 for m in metas)
        assert all(m["prompt_tokens"] == 128 for m in metas)
        tok_s = n * 256 / wall * SCALE[kind]
        target = TARGETS[(variant, kind)]
        print(f"\n{variant:<9} {kind:<10} target {target:7.1f} tok/s  measured {tok_s:7.1f} "
              f"tok/s  ({(tok_s - target) / target:+.1%})")
        assert tok_s == pytest.approx(target, rel=0.10), (variant, kind, tok_s)
        if variant == "eagle3":
            accept = sum(m["completion_tokens"] for m in metas) / sum(
                m["spec_verify_ct"] for m in metas)
            assert 2.6 < accept < 3.3  # coding prompts are in the drafter's training mix


# Second anchor (engines/sim/profiles/model/llama3.1-8b.json "anchor"): SGLang's published
# single-stream Llama-3.1-8B-Instruct on one H100 (MT-bench-like chat prompts).
H100_TARGETS = {"baseline": 158.34, "eagle3": 373.25}
H100_ARGS = ["--sim-hardware", "h100", "--sim-model", "llama3.1-8b"]
H100_VARIANTS = {
    "baseline": [],
    "eagle3": ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5",
               "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32"],
}


@pytest.mark.parametrize("variant", ["baseline", "eagle3"])
def test_h100_llama_single_stream_through_http(launch_sim: LaunchSim, variant: str) -> None:
    scale = 0.25
    sim = launch_sim([*H100_ARGS, *H100_VARIANTS[variant], "--sim-time-scale", str(scale)])
    bodies = [{"text": chat_prompt(i), "stream": True,
               "sampling_params": {"max_new_tokens": 256, "ignore_eos": True, "temperature": 0}}
              for i in range(2)]
    wall, metas = run_generate(sim.url, bodies, concurrent=False)
    assert all(m["completion_tokens"] == 256 for m in metas)
    tok_s = 2 * 256 / wall * scale
    target = H100_TARGETS[variant]
    print(f"\nh100 llama3.1-8b {variant:<9} target {target:7.2f} tok/s  measured {tok_s:7.2f} "
          f"tok/s  ({(tok_s - target) / target:+.1%})")
    assert tok_s == pytest.approx(target, rel=0.10), (variant, tok_s)


# The EAGLE-3 paper (arXiv 2503.01840 v3), abstract and section 4.3 Table 3: EAGLE-3 (a chain of
# 3, no tree) gives SGLang 1.38x the throughput of no speculation at batch size 64, Llama-3.1-8B-
# Instruct on one H100, MT-bench. Typed from the paper; the whole table is checked offline in
# tests/engines/sim/test_scheduler.py.
PAPER_GAIN_BS64 = 1.38
CHAIN3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def test_h100_llama_batch64_gain_through_http(launch_sim: LaunchSim) -> None:
    scale, out = 1.0, 512
    bodies = [{"text": chat_prompt(i), "stream": True,
               "sampling_params": {"max_new_tokens": out, "ignore_eos": True, "temperature": 0}}
              for i in range(64)]
    tok_s = {}
    for variant, extra in (("baseline", []), ("eagle3", CHAIN3)):
        sim = launch_sim([*H100_ARGS, *extra, "--max-running-requests", "64",
                          "--sim-time-scale", str(scale)])
        wall, metas = run_generate(sim.url, bodies, concurrent=True)
        sim.stop()
        assert all(m["completion_tokens"] == out for m in metas)
        tok_s[variant] = 64 * out / wall * scale
    gain = tok_s["eagle3"] / tok_s["baseline"]
    print(f"\nh100 llama3.1-8b batch 64: baseline {tok_s['baseline']:.0f} tok/s, EAGLE-3 "
          f"{tok_s['eagle3']:.0f} tok/s, gain {gain:.2f}x (paper {PAPER_GAIN_BS64}x, "
          f"{(gain - PAPER_GAIN_BS64) / PAPER_GAIN_BS64:+.1%})")
    assert gain == pytest.approx(PAPER_GAIN_BS64, rel=0.10)
