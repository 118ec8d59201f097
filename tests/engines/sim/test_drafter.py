"""The simulated drafter: acceptance follows the prompt's closeness to the drafter's training
data, so other training data visibly changes acceptance (unit level and through the API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.sim.cli import SimArgError, resolve
from engines.sim.drafter import SimDrafter, parse_mix
from engines.sim.profile import load_profile
from tests.engines.sim.conftest import LaunchSim, run_generate
from tests.engines.sim.test_speculation import EAGLE3, accept_length, body
from tests.workloads.test_alignment import CODE_WORDS, PROSE_WORDS, _texts

CODE = _texts(CODE_WORDS, 30, seed=1)
PROSE = _texts(PROSE_WORDS, 30, seed=2)
PROFILE = load_profile().acceptance  # the default model profile's chains


def _training(tmp_path: Path, texts: list[str], name: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"conversations": [{"from": "human", "value": t},
                                                          {"from": "gpt", "value": "..."}]})
                            + "\n" for t in texts))
    return path


def test_other_training_data_changes_the_acceptance_chain(tmp_path):
    code_drafter = SimDrafter(load_profile().acceptance,
                              train_data=str(_training(tmp_path, CODE, "code.jsonl")))
    prose_drafter = SimDrafter(load_profile().acceptance,
                               train_data=str(_training(tmp_path, PROSE, "prose.jsonl")))
    code_prompt, prose_prompt = _texts(CODE_WORDS, 1, seed=3)[0], _texts(PROSE_WORDS, 1, seed=4)[0]
    # On its own data the drafter gets the profile's in-distribution chain, off it the floor.
    assert code_drafter.chain(code_prompt) == pytest.approx(PROFILE["coding"])
    assert code_drafter.chain(prose_prompt) == pytest.approx(PROFILE["encyclopedic"])
    assert prose_drafter.chain(prose_prompt) == pytest.approx(PROFILE["coding"])
    assert prose_drafter.chain(code_prompt) == pytest.approx(PROFILE["encyclopedic"])
    assert code_drafter.info()["reference_rows"] == 30


def test_alignment_is_cached_per_prompt(tmp_path):
    drafter = SimDrafter(load_profile().acceptance,
                         train_data=str(_training(tmp_path, CODE, "code.jsonl")))
    first = drafter.alignment(CODE[0] + " extra")
    assert drafter.alignment(CODE[0] + " extra") == first
    assert len(drafter._cache) == 1


@pytest.mark.parametrize("text,error", [("{", "not JSON"), ("[1]", "JSON object"),
                                        ('{"coding": -1}', ">= 0"),
                                        ('{"coding": 0}', "positive")])
def test_bad_mix_is_refused(text, error):
    with pytest.raises(ValueError, match=error):
        parse_mix(text)
    with pytest.raises(SimArgError, match=error):
        resolve(["--sim-drafter-train-mix", text], env={})


def test_missing_training_data_is_refused(tmp_path):
    with pytest.raises(SimArgError, match="not found"):
        resolve(["--sim-drafter-train-data", str(tmp_path / "nope.jsonl")], env={})


@pytest.mark.slow
def test_training_data_flag_changes_acceptance_through_the_api(launch_sim: LaunchSim, tmp_path):
    prose = _training(tmp_path, PROSE, "prose.jsonl")
    args = [*EAGLE3, "--max-running-requests", "64", "--sim-time-scale", "0"]
    default = launch_sim(args)
    on_prose = launch_sim([*args, "--sim-drafter-train-data", str(prose)])
    got = {}
    for name, sim in (("default", default), ("prose", on_prose)):
        for kind, texts in (("code", _texts(CODE_WORDS, 12, 5)),
                            ("prose", _texts(PROSE_WORDS, 12, 6))):
            _, metas = run_generate(sim.url, [body(t, 64) for t in texts], concurrent=True)
            got[(name, kind)] = accept_length(metas)
    # The default coding/agentic drafter accepts code; one trained on prose accepts prose.
    assert got[("default", "code")] > got[("default", "prose")] + 0.5
    assert got[("prose", "prose")] > got[("prose", "code")] + 0.5
