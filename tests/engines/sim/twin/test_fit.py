"""Fit recovery: a twin fitted to cells of known factors (the closed-form model of the h200 /
llama3.1-8b profile, tests/engines/sim/twin/ground_truth.py), starting from the default
profile's factors, gives the generating factors back."""

from __future__ import annotations

import math

import pytest

from engines.sim.twin import synthetic
from engines.sim.twin.analytic import Scenario, predict
from engines.sim.twin.cells import observe
from engines.sim.twin.fit import bootstrap, factor_table, fit
from engines.sim.twin.params import Space
from tests.engines.sim.twin.ground_truth import (
    ACCEPT_CODING,
    ACCEPT_GENERAL,
    CHAINS,
    EFFICIENCY,
    GENERATING,
    start,
    truth,
)

LOADS = [1, 8, 64, 256]


def fitted(cells: list, **kw) -> tuple[Space, dict[str, float], object]:
    observed = [observe(c) for c in cells]
    space = Space.for_cells(start(), observed)
    best = fit(space, observed, **kw)
    return space, space.values(best.x), best


def test_the_start_is_far_from_the_generating_factors():
    # the default profile's factors (kimi-k2.5-class on rtx-pro-6000): bandwidth 0.489,
    # compute 0.5, spec_step_overhead_ms 6.72, spec_token_overhead_us 1118
    eff = start().efficiency
    assert eff.bandwidth < 0.6 * GENERATING["bandwidth"]
    assert eff.spec_token_overhead_us > 50 * GENERATING["spec_token_overhead_us"]


def test_noise_free_cells_with_position_counters_give_back_every_factor():
    cells = synthetic.cells(truth(), LOADS, noise=0.0, per_position=True)
    _, values, best = fitted(cells)
    for name in EFFICIENCY:
        assert values[name] == pytest.approx(GENERATING[name], rel=1e-3), name
    for i, p in enumerate(CHAINS["coding"][:3]):
        assert values[f"accept_p{i + 1}:coding"] == pytest.approx(p, abs=1e-4)
    # the generating profile has no request overhead: the fit finds none (microseconds)
    assert values["request_overhead_ms"] < 1e-3
    assert best.cost < 1e-10


def test_noisy_cells_hold_the_generating_factors_within_their_intervals():
    # 2 % lognormal noise on every figure; 10 bootstrap replicates. Nine factors are
    # checked at once, so each interval is at 1 - 0.05 / 9 (Bonferroni: all nine hold
    # the truth with >= 95 % probability).
    cells = synthetic.cells(truth(), LOADS, noise=0.02, per_position=True, seed=0)
    observed = [observe(c) for c in cells]
    space = Space.for_cells(start(), observed)
    best = fit(space, observed)
    reps = bootstrap(space, observed, best, replicates=10, seed=0)
    table = factor_table(space, best, reps, level=1 - 0.05 / len(space.factors))
    expected = {**GENERATING, "request_overhead_ms": 0.0,
                **{f"accept_p{i + 1}:coding": p
                                 for i, p in enumerate(CHAINS["coding"][:3])}}
    for name, f in table.items():
        assert f["lo"] <= expected[name] <= f["hi"], (name, f)
        assert f["lo"] < f["value"] < f["hi"], name  # noise gives every factor some width


def test_mean_accept_length_alone_fits_the_chain_s_scale():
    # SGLang's counters give only tokens per verify: the fit scales the start's chain (its
    # shape is kimi-k2.5-class's, not llama's), so the accept length is recovered and the
    # efficiency factors come within a few per cent (the shapes' variances differ).
    cells = synthetic.cells(truth(), LOADS, noise=0.0)
    space, values, best = fitted(cells)
    assert "accept_scale:coding" in values and "accept_p1:coding" not in values
    got = predict(best.setup, Scenario(8, 128, 256, synthetic.EAGLE3, max_running=256,
                                       domains=(("coding", 1.0),)))
    assert got.accept_length == pytest.approx(ACCEPT_CODING, rel=0.01)
    for name in EFFICIENCY:
        assert values[name] == pytest.approx(GENERATING[name], rel=0.06), name


def test_acceptance_is_fitted_per_prompt_domain():
    # coding and chat workloads (chat is the simulator's "general" domain) at two loads
    cells = (synthetic.cells(truth(), [1, 64], noise=0.0, domain="coding")
             + synthetic.cells(truth(), [1, 64], noise=0.0, domain="chat"))
    cells = [c.__class__(**{**c.__dict__, "cell_id": f"{c.workload}-{c.cell_id}"})
             for c in cells]
    _, values, best = fitted(cells)
    assert {"accept_scale:coding", "accept_scale:general"} <= set(values)
    for domain, expected in (("coding", ACCEPT_CODING), ("general", ACCEPT_GENERAL)):
        got = predict(best.setup, Scenario(8, 128, 256, synthetic.EAGLE3, max_running=256,
                                           domains=((domain, 1.0),)))
        assert got.accept_length == pytest.approx(expected, rel=0.01), domain


def test_a_factor_beyond_its_physical_range_stops_at_its_bound():
    # a node whose kernels would read HBM faster than its datasheet (bandwidth 1.3 of peak):
    # the fit cannot go past 0.95 (engines/sim/calibrate.py BOUNDS)
    fast = truth().with_efficiency(bandwidth=1.3)
    cells = synthetic.cells(fast, [1, 8, 64], noise=0.0, variants={"baseline": None})
    _, values, _ = fitted(cells)
    assert values["bandwidth"] == pytest.approx(0.95, abs=1e-6)
    assert math.isfinite(values["compute"])
