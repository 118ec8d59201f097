"""The calibrated envelope of every shipped hardware x model pair (engines/sim/profile.py
Envelope): present exactly where an anchor was measured, and equal to the scenarios
engines/sim/calibrate.py runs for that anchor."""

from __future__ import annotations

import json

import pytest

import engines
from engines.planning import Scenario
from engines.sim.calibrate import anchor_cases, default_cases
from engines.sim.profile import HARDWARE_DIR, MODEL_DIR, Envelope, known, load_profile
from workloads import PROMPTS_DIR

ANCHORED = {("rtx-pro-6000", "kimi-k2.5-class"): "default",
            ("h100", "llama3.1-8b"): "h100-llama3.1-8b"}


@pytest.mark.parametrize("hardware", known(HARDWARE_DIR))
@pytest.mark.parametrize("model", known(MODEL_DIR))
def test_every_shipped_pair_loads_its_envelope_or_none(hardware, model):
    env = load_profile("default", hardware, model).envelope
    if (hardware, model) in ANCHORED:
        assert isinstance(env, Envelope)
        assert (env.anchor, env.hardware, env.model) == (ANCHORED[hardware, model], hardware,
                                                           model)
        assert env.note and env.anchor in env.describe()
    else:
        assert env is None  # no anchor: every cell of this pair is extrapolation


def _covered(cases):
    """(streams range, prompt range, output range, domains, EAGLE-3 shapes) of calibrate.py's
    cases: a closed-loop case over a shipped prompt file is its streams and the file's prompt
    lengths (characters / 4, rounded up, as the server counts them) and domains; a sequential
    synthetic case is one stream, a concurrent one all its requests at once, capped by its
    --max-running-requests."""
    streams, prompts, outputs, domains, shapes = [], [], [], set(), set()
    for case in cases.values():
        argv = case["argv"]
        if "prompts" in case:
            rows = [json.loads(line) for line in
                    (PROMPTS_DIR / case["prompts"]).read_text().splitlines()]
            streams.append(int(case["streams"]))
            prompts += [-(-len(r["text"]) // 4) for r in rows]
            domains |= {r["domain"] for r in rows}
        else:
            n = int(case["requests"]) if case["concurrent"] else 1
            if "--max-running-requests" in argv:
                n = min(n, int(argv[argv.index("--max-running-requests") + 1]))
            streams.append(n)
            prompts.append(int(case["prompt_tokens"]))
            domains.add(case["domain"])
        outputs.append(int(case["output_tokens"]))
        if "--speculative-num-steps" in argv:
            shapes.add(tuple(int(argv[argv.index(f) + 1]) for f in (
                "--speculative-num-steps", "--speculative-eagle-topk",
                "--speculative-num-draft-tokens")))
    return ((min(streams), max(streams)), (min(prompts), max(prompts)),
            (min(outputs), max(outputs)), domains, shapes)


def test_the_envelopes_are_calibrate_pys_scenarios():
    default = load_profile("default")
    md = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
    h100 = load_profile("default", "h100", "llama3.1-8b")
    for prof, cases in ((default, default_cases(default)), (h100, anchor_cases(md["anchor"]))):
        env = prof.envelope
        assert env is not None
        conc, prompts, outputs, domains, shapes = _covered(cases)
        assert env.concurrency == conc == (1, 64)
        assert env.prompt_tokens == prompts and env.output_tokens == outputs
        assert domains in ({env.domain}, set(env.workload_domains))
        assert set(env.speculative) == shapes
    assert default.envelope.output_tokens == (256, 256)
    assert default.envelope.prompt_tokens == (30, 627)  # workloads/prompts/coding.jsonl
    assert h100.envelope.output_tokens == (512, 512)


def test_outside_names_each_reason_and_inside_none():
    env = load_profile("default", "h100", "llama3.1-8b").envelope
    assert env is not None
    inside = dict(concurrency=64, output_tokens=512, prompt_tokens=(128, 128),
                  speculative=(3, 1, 4), domains=["chat"])
    assert env.outside(**inside) == []
    assert env.outside(**{**inside, "output_tokens": 256}) == [
        "256 output tokens outside 512"]
    assert env.outside(**{**inside, "concurrency": 128}) == ["concurrency 128 outside 1-64"]
    assert env.outside(**{**inside, "prompt_tokens": (20, 700)}) == [
        "prompts of 20-700 tokens outside 128"]
    assert len(env.outside(**{**inside, "speculative": (3, 1, 5), "domains": ["coding"]})) == 2
    assert env.outside(**{**inside, "speculative": None, "domains": ["coding"]}) == []


def test_a_bad_envelope_is_refused_when_the_profile_loads(tmp_path):
    data = json.loads((load_profile("default").path).read_text())
    data["calibration"]["envelope"]["concurrency"] = [64, 1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="envelope concurrency"):
        load_profile(str(bad))


EAGLE3 = {"max_running_requests": 64, "speculative_algorithm": "EAGLE3",
          "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}
DEFAULT = {"profile": "default", "hardware": "rtx-pro-6000", "model": "kimi-k2.5-class"}


def test_the_engine_judges_a_scenario_against_its_profiles_envelope():
    """engines/sim/envelope.py, the one place the plan and the report ask (the default
    anchor: concurrency 1-64, prompts of 30-627 tokens, 256 output tokens, coding, EAGLE-3
    3/1/4)."""
    sim = engines.modeller("sim")
    inside = Scenario(args=EAGLE3, concurrency=64, output_tokens=256, prompt_tokens=(128, 128),
                      domains=["coding"])
    found = sim.envelope(DEFAULT, inside)
    assert found.outside == ()
    assert found.covered.startswith("anchor default (rtx-pro-6000 / kimi-k2.5-class)")
    outside = Scenario(args={**EAGLE3, "speculative_num_draft_tokens": None}, concurrency=128,
                       output_tokens=16, prompt_tokens=(20, 700), domains=["chat"],
                       disable_above_batch=8, conversations=True)
    assert sim.envelope(DEFAULT, outside).outside == (
        "multi-turn conversation replay (no anchor covers growing contexts)",
        "speculative algorithm EAGLE3 with SGLang's automatic shape (the anchor measured "
        "EAGLE3 with explicit shapes)",
        "speculative_disable_above_batch (no anchor measured the adaptive switch)",
        "concurrency 128 outside 1-64", "16 output tokens outside 256",
        "prompts of 20-700 tokens outside 30-627")
    # a depth by batch, set or adapted by the engine, is an adaptive switch too
    switched = Scenario(args=EAGLE3, concurrency=64, output_tokens=256,
                        prompt_tokens=(128, 128), domains=["coding"], depth_schedule=True,
                        adaptive=True)
    assert sim.envelope(DEFAULT, switched).outside == (
        "speculative_depth (no anchor measured the adaptive switch)",
        "speculative_adaptive (no anchor measured the adaptive switch)")
    # a baseline's prompt domains do not matter (acceptance is the only thing they change)
    baseline = Scenario(args={"max_running_requests": 64}, concurrency=4, output_tokens=256,
                        prompt_tokens=(128, 128), domains=["chat"])
    assert sim.envelope(DEFAULT, baseline).outside == ()
    assert sim.envelope(DEFAULT, Scenario(args=EAGLE3, concurrency=4, output_tokens=256,
                                          prompt_tokens=(128, 128), domains=["chat"])
                        ).outside == ("prompt domains chat (anchor: coding)",)
    unanchored = sim.envelope({"hardware": "h200", "model": "llama3.1-8b"}, inside)
    assert unanchored.outside == ("no anchor covers h200 / llama3.1-8b (docs/simulator.md "
                                  "'Calibrated envelope')",)
    assert engines.modeller("vllm") is None  # measured: no envelope
