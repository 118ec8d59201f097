"""The engine interface's pure parts: finding engines and their models by folder, GPUs per
server, threshold values and depth schedules per engine."""

from __future__ import annotations

import re

import pytest

import engines


def test_engines_are_found_by_folder_and_an_unknown_one_is_named() -> None:
    assert engines.names() == ("external", "sglang", "sim", "vllm")
    assert engines.get("vllm").label == "vLLM" and engines.get("sim").simulated
    assert not engines.get("external").launches
    with pytest.raises(ValueError, match="no engine 'tgi': the engines are external, sglang"):
        engines.get("tgi")


def test_only_an_engine_that_models_its_numbers_has_a_model() -> None:
    from engines.sim.modeller import MODELLER

    assert [n for n in engines.names() if engines.modeller(n) is not None] == ["sim"]
    assert engines.modeller("sim") is MODELLER and engines.twin_modeller() is MODELLER
    # a measured engine, a name engines/ has no folder for, a missing value: no model
    assert engines.modeller("vllm") is None and engines.modeller("tgi") is None
    assert engines.modeller(None) is None


def test_an_engine_is_simulated_exactly_when_it_has_a_model() -> None:
    # one concept: `simulated` (the cells column, the SIMULATION label) is having a model
    assert [n for n in engines.names() if engines.get(n).simulated] == ["sim"]

    class Unmodelled(engines.get("sim").__class__):
        name = "tgi"  # no folder under engines/, so no model: its numbers are not modelled

    assert not Unmodelled().simulated


def test_gpus_per_server_by_engine_and_device() -> None:
    assert engines.get("vllm").gpus(4, "cuda") == 4
    assert engines.get("vllm").gpus(4, "cpu") == 0  # a CPU server reserves no GPU
    assert engines.get("sglang").gpus(2, "cpu") == 0
    assert engines.get("external").gpus(8, "cuda") == 0
    assert engines.get("sim").gpus(2, "cpu") == 2  # logical GPUs, so groups pack as on a node


def test_threshold_values_per_engine() -> None:
    eagle3 = {"name": "eagle3", "args": {"max_running_requests": 64,
                                         "speculative_algorithm": "EAGLE3",
                                         "speculative_num_steps": 3,
                                         "speculative_eagle_topk": 1}}
    baseline = {"name": "baseline", "args": {"max_running_requests": 64}}
    captured = [*range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60]
    # The simulator routes as SGLang; the H200 profile's 131 GiB gives SGLang's max_bs 256,
    # lowered to the cap of 64. SGLang itself does not know the GPU here: 160, lowered too.
    assert engines.get("sim").threshold_values(eagle3, "h200") == captured
    assert engines.get("sglang").threshold_values(eagle3) == captured
    # vLLM looks the draft count up by the number of scheduled requests: every batch size.
    assert engines.get("vllm").threshold_values(eagle3) == list(range(1, 64))
    assert engines.get("external").threshold_values(eagle3) is None
    for name in ("sim", "sglang", "vllm"):
        assert engines.get(name).threshold_values(baseline) is None, name


def test_a_depth_schedule_is_checked_once_for_every_engine() -> None:
    from engines.depth import depth_schedule

    assert depth_schedule([[1, 5], [9, 3], [33, 1], [65, 0]]) == (
        (1, 5), (9, 3), (33, 1), (65, 0))
    assert depth_schedule(((1, 3),)) == ((1, 3),)  # one tier: a fixed depth
    for bad, words in [
        ([], "non-empty list of [from batch size, depth] pairs"),
        ([[1, 5, 2]], "pairs of ints"),
        ([[1, "5"]], "pairs of ints"),
        ([[1, True]], "pairs of ints"),
        ("1,5", "pairs of ints"),
        ([[2, 5], [9, 3]], "must start from batch size 1, got 2"),
        ([[1, 5], [9, 3], [9, 1]], "ascending by batch size: 9 follows 9"),
        ([[1, 5], [9, 3], [5, 1]], "ascending by batch size: 5 follows 9"),
        ([[1, 5], [9, -1]], "depths must be >= 0 (0 = no drafting), got -1"),
        ([[1, 0], [9, 0]], "drafts at no batch size"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            depth_schedule(bad)
