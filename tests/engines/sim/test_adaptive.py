"""Adaptive speculative decoding: SGLang's config format, routing with CUDA-graph padding, EMA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engines.sglang.adaptive import (
    DEFAULT_ADAPTIVE_CONFIG,
    candidate_steps,
    decode_capture_sizes,
    steps_for_batch,
    threshold_config,
)
from engines.sim.adaptive import (
    AdaptiveController,
    AdaptiveStepSlot,
    load_adaptive_config,
)

# A speculative server pads to the speculative capture list (SGLang 0.5.23
# python/sglang/srt/arg_groups/cuda_graph_hook.py generate_decode_cuda_graph_batch_sizes;
# tests/engines/sglang/test_adaptive.py checks this list against SGLang's own function).
GRAPHS = decode_capture_sizes(256, speculative=True)


def test_default_config_tiers() -> None:
    ctl = AdaptiveController(DEFAULT_ADAPTIVE_CONFIG, initial_steps=3, cuda_graph_bs=GRAPHS)
    assert candidate_steps(DEFAULT_ADAPTIVE_CONFIG) == [0, 1, 3, 5, 7]
    assert ctl.steps_for_batch(1) == 3 and ctl.steps_for_batch(7) == 3
    assert ctl.steps_for_batch(8) == 3  # [0, 1, 3] holds 3
    assert ctl.steps_for_batch(32) == 1  # [0, 1]: 3 not a candidate -> middle = 1
    assert ctl.steps_for_batch(64) == 0 and ctl.steps_for_batch(500) == 0


def test_threshold_config_and_padding() -> None:
    cfg = threshold_config(3, 16)
    assert cfg == threshold_config(3, 16) == {"1": {"candidate_steps": [3]},
                                              "17": {"candidate_steps": [0]}}
    ctl = AdaptiveController(cfg, 3, GRAPHS)
    assert [ctl.steps_for_batch(b) for b in (1, 16, 17, 24, 100)] == [3, 3, 0, 0, 0]
    # N=20 is a captured size of a speculative server: batch 20 drafts, 21 pads to 22 -> no
    ctl20 = AdaptiveController(threshold_config(3, 20), 3, GRAPHS)
    assert ctl20.steps_for_batch(20) == 3 and ctl20.steps_for_batch(21) == 0
    # N=9 falls between the captured 8 and 10: batch 9 pads to 10 = N+1 -> no drafting
    ctl9 = AdaptiveController(threshold_config(3, 9), 3, GRAPHS)
    assert ctl9.steps_for_batch(8) == 3 and ctl9.steps_for_batch(9) == 0
    # without CUDA graphs (--disable-cuda-graph) the switch is exact
    exact = AdaptiveController(threshold_config(3, 20), 3, None)
    assert exact.steps_for_batch(20) == 3 and exact.steps_for_batch(21) == 0


# Expected steps derived by hand from SGLang's routing (python/sglang/srt/speculative/
# adaptive_spec_params.py, `AdaptiveSpeculativeParams._route` and `AdaptiveStepSlot.__init__`):
# pad the batch to the next size of a speculative server's capture list (1..8, then 10..32 step
# 2, then 40..64 step 4, then step 8 to 256; a batch above the largest is not padded), take the
# largest tier key <= it, start at the initial steps (3) if that tier offers them, else at its
# middle candidate.
ROUTED = [
    # SGLang's default tiers 1 -> [1,3,5,7], 8 -> [0,1,3], 32 -> [0,1], 64 -> [0];
    # 25 pads to 26 (tier 8), 33 to 40 and 57 to 60 (tier 32)
    (DEFAULT_ADAPTIVE_CONFIG, {1: 3, 4: 3, 5: 3, 8: 3, 24: 3, 25: 3, 32: 1, 33: 1, 57: 1,
                               64: 0, 300: 0}),
    # a threshold at 8: 1 -> [3], 9 -> [0]; batch 9 pads to 10
    (threshold_config(3, 8), {1: 3, 8: 3, 9: 0, 12: 0, 100: 0}),
    # a threshold at 20 (a captured size of a speculative server): 17 pads to 18 and 20 stays
    # 20, both draft; 21 pads to 22 >= 21, so no drafting
    (threshold_config(5, 20), {1: 5, 16: 5, 17: 5, 20: 5, 21: 0, 256: 0}),
]


@pytest.mark.parametrize(("cfg", "expected"), ROUTED)
def test_routing_follows_sglang(cfg: dict[str, Any], expected: dict[int, int]) -> None:
    ctl = AdaptiveController(cfg, 3, GRAPHS)
    assert {b: ctl.steps_for_batch(b) for b in expected} == expected
    assert {b: steps_for_batch(cfg, b, initial_steps=3, cuda_graph_bs=GRAPHS)
            for b in expected} == expected


def test_load_and_validate(tmp_path: Path) -> None:
    assert load_adaptive_config(None) == DEFAULT_ADAPTIVE_CONFIG
    good = tmp_path / "a.json"
    good.write_text(json.dumps({"1": {"candidate_steps": [1, 3]}, "ema_alpha": 0.5}))
    assert load_adaptive_config(good)["ema_alpha"] == 0.5
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"1": {"candidate_steps": [-1]}}))
    with pytest.raises(ValueError):
        load_adaptive_config(bad)
    none = tmp_path / "c.json"
    none.write_text(json.dumps({"ema_alpha": 0.5}))
    with pytest.raises(ValueError):
        load_adaptive_config(none)


def test_ema_slot_moves_with_acceptance() -> None:
    slot = AdaptiveStepSlot(3, {"candidate_steps": [1, 3, 5, 7], "warmup_batches": 2,
                                "update_interval": 1})
    for _ in range(30):
        slot.update([slot.current_steps] * 3)  # every draft accepted: step up to the top
    assert slot.current_steps == 7
    for _ in range(60):
        slot.update([0, 0])  # nothing accepted: back down
    assert slot.current_steps == 1
    zero = AdaptiveStepSlot(0, {"candidate_steps": [0, 1], "warmup_batches": 0,
                                "update_interval": 1})
    zero.update([0])
    assert zero.current_steps == 1  # from 0 it probes the next step up, as SGLang does


def test_the_simulator_pins_a_depth_schedule_per_running_batch(tmp_path: Path) -> None:
    """The simulator started with the command specgrid gives it for a schedule (its own CLI,
    resolve, and the engine a server runs): each running batch gets its tier's depth."""
    from engines.launch import ServerRequest
    from engines.sim.cli import resolve
    from engines.sim.core import SimEngine
    from engines.sim.engine import ENGINE

    spec = ENGINE.launch_spec(ServerRequest(
        args={"max_running_requests": 64, "speculative_algorithm": "EAGLE3",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1}, env={},
        model_path="m", draft_model_path="d", python="py",
        depth_schedule=((1, 5), (9, 3), (33, 1), (65, 0)),
        options={"hardware": "h200", "model": "llama3.1-8b"}))
    for name, text in spec.files.items():
        (tmp_path / name).write_text(text)
    engine = SimEngine(resolve(spec.argv_in(str(tmp_path))[3:], env={}))
    assert engine.adaptive is not None and engine.spec is not None
    assert engine.spec.steps == 5  # --speculative-num-steps: the largest depth
    # By hand, as SGLang routes (max_bs 64: 141 GB gives 256, lowered to the 64 running):
    # 1-8 captured -> 5; 9 pads to 10, up to 32 -> 3; 33 pads to 36, up to 64 -> 1; 65+ is
    # past the largest captured size -> 0.
    got = [engine.adaptive.steps_for_batch(b) for b in range(1, 101)]
    assert got == [5] * 8 + [3] * 24 + [1] * 32 + [0] * 36


def test_sglangs_default_tiers_follow_acceptance_each_on_its_own() -> None:
    """SGLang's default tiers (warmup 10 verifies, a decision every 5; EMA alpha 0.2 from
    steps - 1), the numbers worked by hand from AdaptiveStepSlot's rules. Tier 1 [1,3,5,7] at
    batch 2, from 3 steps, every draft accepted: EMA after 15 verifies 3 - 0.8^15 = 2.96 > 3 -
    0.5 -> 5; after 25, 5 - (5 - 2.96) 0.8^10 = 4.78 > 4.5 -> 7. Then nothing accepted: at 30
    the EMA is 4.78 x 0.8^5 = 1.57 <= 4.25 (5 - 0.5 - 0.25) and <= 2.25 but > 0.25 -> 3; at
    40, 1.57 x 0.8^10 = 0.17 <= 0.25 -> 1. Tier 8 [0,1,3] at batch 16 (no hysteresis), from 3,
    nothing accepted: 2 x 0.8^15 = 0.07 <= 0.5 -> 0 at 15; from 0 it probes 1 at 20."""
    ctl = AdaptiveController(DEFAULT_ADAPTIVE_CONFIG, initial_steps=3, cuda_graph_bs=GRAPHS)
    small: list[int] = []
    for i in range(1, 41):
        steps = ctl.steps_for_batch(2)
        ctl.on_verify(2, [steps, steps] if i <= 25 else [0, 0])
        small.append(ctl.steps_for_batch(2))
    assert small[13] == 3 and small[14] == 5  # verify 14 / 15
    assert small[23] == 5 and small[24] == 7
    assert small[28] == 7 and small[29] == 3
    assert small[38] == 3 and small[39] == 1
    large: list[int] = []
    for _ in range(20):
        ctl.on_verify(16, [0] * 16)
        large.append(ctl.steps_for_batch(16))
    assert large[13] == 3 and large[14] == 0 and large[18] == 0 and large[19] == 1
    assert ctl.steps_for_batch(2) == 1  # tier 1 kept its own state
