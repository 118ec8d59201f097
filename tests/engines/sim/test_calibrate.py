"""The default anchor's calibration scenario (profiles/default.json ``calibration.scenario``,
run by engines/sim/calibrate.py) is what the default sweep (``+sweep=concurrency``) sends: the
same prompt file, output length, sampling, server flags and drafter, at the sweep's two ends of
concurrency. If the sweep changes, the anchor must be refitted on it (docs/simulator.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from engines.sim.calibrate import (
    closed_loop_tok_s,
    default_cases,
    make_engine,
    serve,
    workload_prompts,
)
from engines.sim.profile import load_profile
from grid.cli.flags import CONFIG_NAME
from grid.plan.config import register_configs
from grid.questions import schema_keys
from grid.run import CONF_DIR


def _default_sweep(variant: str) -> dict[str, Any]:
    register_configs(schema_keys())
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR), job_name="t"):
        cfg = compose(CONFIG_NAME, ["+sweep=concurrency", f"variant={variant}"])
    out = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(out, dict)
    return {str(k): v for k, v in out.items()}


def test_the_calibration_scenario_is_what_the_default_sweep_sends() -> None:
    prof = load_profile("default")
    sc = prof.data["calibration"]["scenario"]
    base, eagle = _default_sweep("baseline"), _default_sweep("eagle3")
    axes = base["grid"]["axes"]
    assert axes["workload"] == ["coding"] and axes["variant"] == ["baseline", "eagle3"]
    assert (min(axes["concurrency"]), max(axes["concurrency"])) == (1, sc["saturated_streams"])
    work = base["workload"]
    assert work["prompts"] == sc["prompts"] and not work["input_tokens"]
    assert work["max_new_tokens"] == sc["output_tokens"]
    assert (work["temperature"], work["ignore_eos"]) == (sc["temperature"], sc["ignore_eos"])
    assert work["endpoint"] == "generate"  # the prompt text as it is, no chat template
    for cfg in (base, eagle):
        assert cfg["variant"]["args"]["max_running_requests"] == sc["max_running_requests"]
        assert (cfg["hardware"]["name"], cfg["model"]["name"]) == (prof.data["hardware"],
                                                                  prof.data["model"])
        assert cfg["engine"]["options"]["profile"] == "default"
    args = eagle["variant"]["args"]
    assert args["speculative_algorithm"] == "EAGLE3"
    assert {k: args[k] for k in sc["eagle3"]} == sc["eagle3"]
    assert eagle["model"]["drafter"]["train_mix"] == sc["drafter_train_mix"]
    # the calibration's server command lines carry exactly those flags
    cases = default_cases(prof)
    assert cases["baseline_single"]["argv"] == ["--max-running-requests", "64"]
    assert "--sim-drafter-train-mix" in cases["eagle3_saturated"]["argv"]


def test_the_closed_loop_reads_the_steady_window_of_the_shipped_prompts() -> None:
    """One stream: the window runs from the first send to the last, so it holds every request
    but the last, one after another: the same tok/s as serving those requests back to back
    (``serve`` with one stream, no window). More streams serve more tokens per second."""
    prof = load_profile("default")
    texts = workload_prompts("coding.jsonl")
    assert len(texts) == 70 and all(texts)
    one = closed_loop_tok_s(make_engine(prof, []), texts, 32, streams=1, requests=6)
    back_to_back = 5 * 32 / serve(make_engine(prof, []), texts.__getitem__, 32, 1, 5)[1]
    assert one == pytest.approx(back_to_back, rel=0.01)
    four = closed_loop_tok_s(make_engine(prof, []), texts, 32, streams=4, requests=16)
    assert one < four < 4 * one
