"""The simulator's options (engines/sim/options.py) are its `--sim-*` flags, checked with the
profiles they name before anything starts."""

from __future__ import annotations

import json

import pytest

import engines
from engines.options import OptionError
from engines.sim.cli import build_parser
from engines.sim.options import OPTIONS


def test_the_options_are_the_sim_flags():
    flags = {a.dest.removeprefix("sim_") for a in build_parser()._actions
             if a.dest.startswith("sim_")}
    assert set(OPTIONS) == flags
    ns = build_parser().parse_args([])
    assert (ns.sim_profile, ns.sim_time_scale, ns.sim_unforced_spec_cost_scale, ns.sim_seed,
            ns.sim_start_seed, ns.sim_crash_after_requests) == ("default", 1.0, 1.0, None, 0, None)
    ns = build_parser().parse_args(["--sim-time-scale", "0.5", "--sim-seed", "3",
                                    "--sim-crash-after-requests", "2", "--sim-model", "m"])
    assert (ns.sim_time_scale, ns.sim_seed, ns.sim_crash_after_requests, ns.sim_model) == \
        (0.5, 3, 2, "m")


@pytest.mark.parametrize(("options", "message"), [
    ({"hardware": "h999"}, "hardware: simulator hardware profile 'h999' not found; known: cpu, "
                           "h100, "),
    ({"model": "gpt-9"}, "model: simulator model profile 'gpt-9' not found; known: "),
    ({"profile": "/nonexistent/p.json"}, "profile: simulator profile '/nonexistent/p.json' not "
                                         "found; known: default"),
    ({"drafter_train_mix": "{"}, "drafter_train_mix: --sim-drafter-train-mix is not JSON"),
    ({"error_rate": 2}, "error_rate must be within [0, 1], got 2"),
    ({"unforced_spec_cost_scale": 0}, "unforced_spec_cost_scale must be > 0, got 0"),
])
def test_a_bad_option_names_its_key(options, message):
    with pytest.raises(OptionError) as e:
        engines.get("sim").check_options(options)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert e.value.key == next(iter(options))


def test_the_drafter_options_follow_the_drafter():
    sim = engines.modeller("sim")
    assert sim.drafter_options("/data/train.jsonl", {"coding": 1.0}) == {
        "drafter_train_data": "/data/train.jsonl"}  # the data wins over a mix
    assert sim.drafter_options(None, {"math": 0.5, "coding": 0.5}) == {
        "drafter_train_mix": '{"coding": 0.5, "math": 0.5}'}
    assert sim.drafter_options(None, None) == {}


def test_a_profile_with_its_own_model_inline_is_checked_by_that_name(tmp_path):
    # a twin of a model no shipped profile describes (docs/twin.md): its model is inline
    from engines.sim.profile import MODEL_DIR
    from engines.sim.twin.node import model_from_config, node_profile
    from tests.engines.sim.twin.test_node import DRAFTER, TARGET

    start = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
    data = dict(node_profile("cpu", model_from_config("tiny_trained", TARGET, DRAFTER,
                                                      start)).data)
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))
    engines.get("sim").check_options({"profile": str(path), "hardware": "cpu",
                                      "model": "tiny_trained"})
    with pytest.raises(OptionError) as e:
        engines.get("sim").check_options({"profile": str(path), "model": "llama3.1-8b"})
    assert "is fitted on model 'tiny_trained', not 'llama3.1-8b'" in str(e.value)
