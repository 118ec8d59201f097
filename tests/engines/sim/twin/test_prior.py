"""What a twin predicts before a search measures (engines/sim/twin/prior.py): the speedup at
each load of a search's lattice, from the twin's profile file. Checked against the generating
model computed here directly (the closed form of h200 / llama3.1-8b at each load), which the
twin was fitted to at four loads only."""

from __future__ import annotations

import math

import pytest

import engines
from engines.sim.twin.analytic import Scenario, crossover, predict
from engines.twin_data import SpeedupQuestion
from tests.engines.sim.twin.ground_truth import truth, write_twin

LATTICE = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
BASELINE = {"name": "baseline", "args": {"max_running_requests": 256}, "env": {}}
EAGLE3 = {"name": "eagle3", "env": {}, "args": {
    "max_running_requests": 256, "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}}
WORKLOAD = {"name": "coding", "max_new_tokens": 256, "temperature": 0.0, "ignore_eos": True}


def question(variant: dict = EAGLE3) -> SpeedupQuestion:
    return SpeedupQuestion(
        baseline={"variant": BASELINE, "workload": WORKLOAD},
        variant={"variant": variant, "workload": WORKLOAD}, tp_size=1, loads=LATTICE,
        prompt_tokens=128.0, domains={"coding": 1.0}, requests_per_stream=4.0)


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> str:
    # fitted at c = 1, 8, 64, 256 (noise-free cells of the generating model), starting from
    # the default profile's factors, as bench/twin_goal.py does
    return str(write_twin(tmp_path_factory.mktemp("twin")))


def generating_speedups() -> list[float]:
    """variant / baseline - 1 of the generating model at each lattice level."""
    out = []
    for c in LATTICE:
        base = Scenario(c, 128.0, 256.0, None, 256, domains=(("coding", 1.0),))
        spec = Scenario(c, 128.0, 256.0, (3, 1, 4), 256, domains=(("coding", 1.0),))
        out.append(predict(truth(), spec).output_tok_s / predict(truth(), base).output_tok_s - 1)
    return out


def test_the_twin_predicts_the_speedup_at_every_level_and_the_crossover(twin):
    predicted = engines.twin_modeller().predict_speedups(twin, question())
    assert predicted is not None and len(predicted) == len(LATTICE)
    truth_ = generating_speedups()
    # within 3 points of speedup at every level, at 12 levels the twin never saw
    assert max(abs(p - t) for p, t in zip(predicted, truth_, strict=True)) < 0.03
    # the same crossover interval as the generating model's
    assert crossover([(c, 1 + p) for c, p in zip(LATTICE, predicted, strict=True)]) == \
        crossover([(c, 1 + t) for c, t in zip(LATTICE, truth_, strict=True)]) is not None
    assert all(math.isfinite(p) for p in predicted)


def test_a_profile_that_is_no_twin_or_a_variant_that_does_not_speculate_is_one_line(twin):
    with pytest.raises(ValueError, match="is not a twin's profile"):
        engines.twin_modeller().predict_speedups("default", question())
    with pytest.raises(ValueError, match="does not speculate"):
        engines.twin_modeller().predict_speedups(twin, question(BASELINE))
