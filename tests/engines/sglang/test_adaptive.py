"""The speculation threshold as SGLang's adaptive config, and the router the simulator uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.sglang import adaptive
from engines.sglang.versions import FlagError

# SGLang 0.5.23's DEFAULT_ADAPTIVE_CONFIG (python/sglang/srt/speculative/adaptive_spec_params.py)
SGLANG_DEFAULT = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25,
          "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
          "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
}

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def test_threshold_config_format() -> None:
    assert adaptive.threshold_config(3, 16) == {
        "1": {"candidate_steps": [3]}, "17": {"candidate_steps": [0]}}
    assert adaptive.candidate_steps(adaptive.threshold_config(3, 16)) == [0, 3]


@pytest.mark.parametrize(("steps", "n"), [(0, 4), (3, 0), (True, 4), (3, 2.5)])
def test_threshold_config_rejects_bad_values(steps: object, n: object) -> None:
    with pytest.raises(FlagError):
        adaptive.threshold_config(steps, n)  # type: ignore[arg-type]


def test_steps_for_batch_threshold() -> None:
    cfg = adaptive.threshold_config(3, 16)
    assert [adaptive.steps_for_batch(cfg, b) for b in (0, 1, 8, 16, 17, 64, 1000)] == [
        3, 3, 3, 3, 0, 0, 0]


def test_steps_for_batch_cuda_graph_padding() -> None:
    cfg = adaptive.threshold_config(3, 10)
    graphs = [1, 2, 4, 8, 12, 16]
    # 9 pads to 12 > 10: speculation already off; past the largest graph the size stays
    assert adaptive.steps_for_batch(cfg, 8, cuda_graph_bs=graphs) == 3
    assert adaptive.steps_for_batch(cfg, 9, cuda_graph_bs=graphs) == 0
    assert adaptive.steps_for_batch(cfg, 40, cuda_graph_bs=graphs) == 0
    assert adaptive.tier_for_batch(cfg, 9, cuda_graph_bs=graphs) == 11


def test_steps_for_batch_sglang_default_tiers() -> None:
    # tiers 1-7 -> [1,3,5,7]; 8-31 -> [0,1,3]; 32-63 -> [0,1]; >=64 -> [0]
    got = [adaptive.steps_for_batch(SGLANG_DEFAULT, b, initial_steps=3)
           for b in (1, 7, 8, 31, 32, 63, 64, 512)]
    assert got == [3, 3, 3, 3, 1, 1, 0, 0]  # 3 not in [0, 1] -> middle candidate (1)
    assert adaptive.steps_for_batch(SGLANG_DEFAULT, 1) == 5  # no initial: middle of 4
    assert adaptive.candidate_steps(SGLANG_DEFAULT) == [0, 1, 3, 5, 7]


def test_load_tiers_is_robust(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"ema_alpha": 0.3, "strategy": "ema", **SGLANG_DEFAULT}))
    assert adaptive.load_tiers(path) == {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
    assert adaptive.steps_for_batch(str(path), 100) == 0
    assert adaptive.load_tiers({1: {"candidate_steps": [3, 3]}}) == {1: [3]}  # int keys ok
    for bad in ({"1": {"candidate_steps": []}}, {"1": {"candidate_steps": [-1]}},
                {"1": {"candidate_steps": "3"}}, {"1": {}}, {"ema_alpha": 0.2}):
        with pytest.raises(ValueError):
            adaptive.load_tiers(bad)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        adaptive.load_tiers(path)


def test_write_config_content_addressed(tmp_path: Path) -> None:
    a = adaptive.write_config(adaptive.threshold_config(3, 16), tmp_path / "adaptive")
    b = adaptive.write_config({"17": {"candidate_steps": [0]}, "1": {"candidate_steps": [3]}},
                              tmp_path / "adaptive")
    c = adaptive.write_config(adaptive.threshold_config(3, 32), tmp_path / "adaptive")
    assert a == b != c
    assert a.name.startswith("adaptive-") and a.suffix == ".json" and a.is_absolute()
    assert json.loads(a.read_text()) == adaptive.threshold_config(3, 16)
    assert sorted(p.name for p in (tmp_path / "adaptive").iterdir()) == sorted({a.name, c.name})


@pytest.mark.parametrize(("override", "field"), [
    ({"speculative_algorithm": "NGRAM"}, "speculative_algorithm"),
    ({"speculative_algorithm": None}, "speculative_algorithm"),
    ({"speculative_eagle_topk": 4}, "speculative_eagle_topk"),
    ({"speculative_num_steps": None}, "speculative_num_steps"),
    ({"speculative_adaptive": True}, "speculative_adaptive"),
])
def test_threshold_needs_eagle_topk1_steps(override: dict, field: str) -> None:
    with pytest.raises(FlagError) as e:
        adaptive.check_threshold_args({**EAGLE3, **override}, 16, "0.5.23")
    assert e.value.field == field


def test_threshold_needs_zero_step_support() -> None:
    with pytest.raises(FlagError, match=r"0\.5\.13.*0\.5\.14"):
        adaptive.check_threshold_args(EAGLE3, 16, "0.5.13")
    assert adaptive.check_threshold_args(EAGLE3, 16, None) == 3
    assert adaptive.check_threshold_args({**EAGLE3, "speculative_eagle_topk": None,
                                          "speculative_algorithm": "EAGLE"}, 16, "0.5.14") == 3


def test_threshold_args_adds_adaptive_flags(tmp_path: Path) -> None:
    out = adaptive.threshold_args(EAGLE3, 16, tmp_path, "0.5.23")
    assert out["speculative_adaptive"] is True
    path = Path(out["speculative_adaptive_config"])
    assert path.parent == tmp_path.absolute()
    assert adaptive.steps_for_batch(path, 16, initial_steps=3) == 3
    assert adaptive.steps_for_batch(path, 17, initial_steps=3) == 0
    # num_steps must be one of the union of candidates, as SGLang checks
    assert EAGLE3["speculative_num_steps"] in adaptive.candidate_steps(path)
