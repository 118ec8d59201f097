"""The twin's closed-form model (engines/sim/twin/analytic.py) against the discrete simulator
(the scheduler core the server runs, driven as a closed loop without a clock, engines/sim/
calibrate.py ``closed_loop``): a baseline closed loop runs in waves, which the closed form
describes exactly."""

from __future__ import annotations

import pytest

from engines.sim.calibrate import closed_loop
from engines.sim.profile import load_profile
from engines.sim.twin.analytic import Scenario, Setup, cell_scenario, predict

NODE = ["--sim-hardware", "h200", "--sim-model", "llama3.1-8b", "--max-running-requests", "256"]


@pytest.mark.parametrize("concurrency", [1, 8])
def test_a_baseline_wave_is_what_the_discrete_simulator_serves(concurrency):
    profile = load_profile("default", "h200", "llama3.1-8b")
    served = closed_loop(profile, NODE, concurrency, 128, 64, requests_per_stream=2)
    got = predict(Setup.from_profile(profile),
                  Scenario(concurrency, 128, 64, None, max_running=256, requests_per_stream=2))
    assert got.output_tok_s == pytest.approx(served.output_tok_s, rel=1e-3)
    assert got.ttft_p50_s == pytest.approx(served.ttft_p50_s, rel=1e-3)
    assert got.tpot_p50_s == pytest.approx(served.tpot_p50_s, rel=1e-3)


def test_a_capped_batch_queues_the_other_streams():
    setup = Setup.from_profile(load_profile("default", "h200", "llama3.1-8b"))
    capped = predict(setup, Scenario(64, 128, 64, None, max_running=32))
    free = predict(setup, Scenario(32, 128, 64, None, max_running=32))
    assert capped.batch == free.batch == 32
    assert capped.output_tok_s == pytest.approx(free.output_tok_s, rel=0.02)
    # 64 streams on 32 slots: the median new request waits for one wave (floor(2 - 1/2))
    assert capped.ttft_p50_s > free.ttft_p50_s + 0.9 * 64 / free.output_tok_s * 32


def test_a_forced_acceptance_replaces_the_drafters_in_every_domain():
    from engines.sim.twin.analytic import acceptance

    setup = Setup.from_profile(load_profile("default"))
    forced = Scenario(1, 128, 64, (3, 1, 4), domains=(("coding", 0.5), ("general", 0.5)),
                      known_reach=(1.0, 0.5, 0.0))
    # length 2.5 as rates 1, 0.5, 0: every step accepts 2 or 3 tokens, half each, in both
    # domains: mean 2.5, variance 0.25, the per-position shares the rates
    e, var, shares = acceptance(setup, forced)
    assert (e, var) == (pytest.approx(2.5), pytest.approx(0.25))
    assert shares == pytest.approx((1.0, 0.5, 0.0))
    # the drafter's own acceptance differs by domain; forced, a prediction follows the length
    longer = predict(setup, Scenario(1, 128, 64, (3, 1, 4), known_reach=(1.0, 1.0, 0.5)))
    assert longer.accept_length == pytest.approx(3.5)
    assert longer.output_tok_s > predict(setup, forced).output_tok_s


EAGLE3_ARGS = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
               "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def _config(**variant) -> dict:
    return {"workload": {"max_new_tokens": 256, "temperature": 0.0, "ignore_eos": True},
            "variant": {"args": dict(EAGLE3_ARGS), **variant}}


def test_a_cells_config_is_read_as_the_simulator_serves_it():
    sc = cell_scenario(_config(), 8, 128.0, {"chat": 0.5, "coding": 0.5}, 4.0)
    assert (sc.spec, sc.output_tokens, sc.known_reach, sc.off_above) == ((3, 1, 4), 256.0, None,
                                                                         None)
    assert sc.domains == (("coding", 0.5), ("general", 0.5))  # chat is the simulator's general
    # topk 1 verifies steps + 1 tokens whatever num_draft_tokens says (SGLang adjusts it)
    deep = _config(args={**EAGLE3_ARGS, "speculative_num_steps": 7})
    assert cell_scenario(deep, 8, 128.0, None, 4.0).spec == (7, 1, 8)
    # length 2.5 with k = 3 by the minimum-variance schedule: 1, 0.5, 0
    forced = _config(forced_acceptance={"length": 2.5, "rates": None})
    assert cell_scenario(forced, 8, 128.0, None, 4.0).known_reach == (1.0, 0.5, 0.0)
    threshold = _config(speculative_disable_above_batch=4)
    assert cell_scenario(threshold, 8, 128.0, None, 4.0).off_above == 4


def test_above_its_threshold_a_batch_verifies_no_drafts():
    setup = Setup.from_profile(load_profile("default", "h200", "llama3.1-8b"))
    on = Scenario(8, 128, 64, (3, 1, 4), max_running=256, off_above=8)
    off = Scenario(8, 128, 64, (3, 1, 4), max_running=256, off_above=4)
    assert predict(setup, on).accept_length > 2  # the drafter's chain, about 3
    got = predict(setup, off)
    assert got.accept_length == 1.0 and got.acceptance_per_position == (0.0, 0.0, 0.0)
    # a verify step of one token through the speculative path costs more than a decode step
    base = predict(setup, Scenario(8, 128, 64, None, max_running=256))
    assert got.output_tok_s < base.output_tok_s
