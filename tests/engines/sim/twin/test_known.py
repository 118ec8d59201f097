"""A twin of the system alone (`--known-acceptance`): each speculative cell's acceptance is an
input, not a drafter to fit, so cells of drafters of any quality (a ladder, forced lengths)
fit one set of step costs; and the repeat spread a twin's held-out error is judged against."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engines.sim.twin import synthetic
from engines.sim.twin.analytic import Scenario, acceptance, predict
from engines.sim.twin.cells import observe
from engines.sim.twin.fit import fit
from engines.sim.twin.holdout import goal, repeat_spread
from engines.sim.twin.params import Space
from engines.twin_data import MeasuredCell
from tests.engines.sim.twin.ground_truth import EFFICIENCY, GENERATING, start, truth

LOADS = [1, 8, 64, 256]


def test_a_known_chain_sets_the_accept_length_and_its_variance():
    sc = Scenario(concurrency=1, prompt_tokens=100, output_tokens=64, spec=(4, 1, 5),
                  known_reach=(0.8, 0.5, 0.2))
    mean, var, shares = acceptance(truth(), sc)
    # A = 1 + accepted run; P(A >= 2..5) = 0.8, 0.5, 0.2, 0 (the fourth position not given)
    assert mean == pytest.approx(2.5)
    # E[A^2] = 1 + 3 x 0.8 + 5 x 0.5 + 7 x 0.2 = 7.3; variance 7.3 - 2.5^2 = 1.05
    assert var == pytest.approx(1.05)
    assert shares == pytest.approx((0.8, 0.5, 0.2, 0.0))


def ladder(reaches: dict[str, tuple[float, ...]], loads: list[int]) -> list[MeasuredCell]:
    """Noise-free cells of the generating profile: the baseline and one speculative variant
    per known chain (a rung), its figures predicted at that chain."""
    base = synthetic.cells(truth(), loads, {"baseline": None}, noise=0.0)
    spec = synthetic.cells(truth(), loads, {"eagle3": synthetic.EAGLE3}, noise=0.0)
    out = list(base)
    for name, reach in reaches.items():
        for cell in spec:
            rung = replace(cell, cell_id=f"{name}-c{cell.concurrency}", variant=name,
                           known_acceptance=reach)
            pred = predict(truth(), observe(rung).scenario)
            out.append(replace(rung, output_tok_s=pred.output_tok_s,
                               ttft_p50_s=pred.ttft_p50_s, tpot_p50_s=pred.tpot_p50_s))
    return out


RUNGS = {"good": (0.9, 0.8, 0.7), "middling": (0.6, 0.35, 0.15), "poor": (0.2, 0.04, 0.0)}


def test_drafters_of_any_quality_fit_one_set_of_step_costs():
    observed = [observe(c) for c in ladder(RUNGS, LOADS)]
    space = Space.for_cells(start(), observed)
    # no acceptance factor: the chains are given, only the system is fitted
    assert not [n for n in space.names if ":" in n]
    values = space.values(fit(space, observed).x)
    for name in EFFICIENCY:
        assert values[name] == pytest.approx(GENERATING[name], rel=1e-3), name


def test_the_repeat_spread_is_each_repeated_cell_s_range_over_its_mean():
    cells = synthetic.cells(truth(), [1, 8], {"baseline": None}, noise=0.0)
    again = [replace(c, repeat=1, output_tok_s=c.output_tok_s * f)
             for c, f in zip(cells, (1.1, 0.8), strict=True)]
    spread = repeat_spread([observe(c) for c in cells + again])
    # c=1: range 0.1 over mean 1.05 = 9.524 %; c=8: 0.2 over 0.9 = 22.222 %
    got = spread["output_tok_s"]
    assert got["n"] == 2
    assert got["mean_pct"] == pytest.approx((100 * 0.1 / 1.05 + 100 * 0.2 / 0.9) / 2)
    assert got["max_pct"] == pytest.approx(100 * 0.2 / 0.9)
    # the same cells without a second repeat have no spread
    assert repeat_spread([observe(c) for c in cells]) == {}


def test_the_goal_is_the_larger_of_ten_per_cent_and_the_spread():
    spread = {"output_tok_s": {"n": 2, "mean_pct": 15.0, "max_pct": 20.0}}
    met = goal({"output_tok_s": {"mae_pct": 12.0}}, spread)
    assert met == {"metric": "output_tok_s", "error_pct": 12.0, "spread_pct": 15.0,
                   "bound_pct": 15.0, "met": True}
    quiet = {"output_tok_s": {"n": 2, "mean_pct": 3.0, "max_pct": 4.0}}
    assert goal({"output_tok_s": {"mae_pct": 12.0}}, quiet)["met"] is False  # bound 10 %
    assert goal({"output_tok_s": {"mae_pct": 12.0}}, {}) is None
