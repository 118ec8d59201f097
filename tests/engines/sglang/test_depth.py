"""A speculative depth schedule on SGLang (engines/sglang/depth.py): one candidate per tier in
SGLang's adaptive config, --speculative-num-steps = the largest depth, the depth each running
batch gets after SGLang pads it to a captured CUDA-graph size; SGLang's own runtime
adaptation refused where SGLang would drop it. Where SGLang is installed
(SPECGRID_SGLANG_PYTHON), SGLang's own loader, router and refusal rule read the same files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engines.launch import ServerRequest
from engines.sglang import adaptive, depth
from engines.sglang.command import server_args
from engines.validation import FlagError

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
          "max_running_requests": 64}
SCHEDULE = ((1, 5), (9, 3), (33, 1), (65, 0))
GRAPHS_64 = adaptive.decode_capture_sizes(64, speculative=True)


def request(args: dict[str, Any] = EAGLE3, **kw: Any) -> ServerRequest:
    return ServerRequest(args=args, env={}, model_path="m", draft_model_path="d", **kw)
"""A speculative server with max_bs 64 pads to 1..8, 10..32 step 2, 40..64 step 4."""

# The depth SGLang gives each running batch 1..100 under SCHEDULE, by hand from its routing
# (pad to the next captured size, then the tier with the largest start <= it): 1-8 are captured
# (tier 1: 5); 9 pads to 10 and 10-32 stay even sizes >= 9 (tier 9: 3); 33 pads to 36 (tier
# 33: 1) up to 64; 65+ is past the largest captured size, unpadded (tier 65: 0).
EXPECTED = [5] * 8 + [3] * 24 + [1] * 32 + [0] * 36


def test_each_tier_is_one_candidate_and_the_server_drafts_the_largest_depth() -> None:
    assert depth.schedule_config(SCHEDULE) == {
        "1": {"candidate_steps": [5]}, "9": {"candidate_steps": [3]},
        "33": {"candidate_steps": [1]}, "65": {"candidate_steps": [0]}}
    fields = server_args(request(version="0.5.23", depth_schedule=SCHEDULE))
    name, text = depth.schedule_file(EAGLE3, SCHEDULE, "0.5.23")
    # SGLang requires --speculative-num-steps in the union of candidates (0, 1, 3, 5) and
    # resolves draft tokens to steps + 1 with topk 1.
    assert fields["speculative_num_steps"] == 5 and fields["speculative_num_draft_tokens"] == 6
    assert fields["speculative_adaptive"] is True
    assert fields["speculative_adaptive_config"] == f"{{files}}/{name}"
    assert json.loads(text) == depth.schedule_config(SCHEDULE)


def test_a_threshold_is_the_two_tier_schedule() -> None:
    # speculative_disable_above_batch 16 with 3 steps = 3 up to batch 16, 0 from 17: the same
    # config, so the same content-addressed file and command line as before.
    two_tiers = depth.schedule_config(((1, 3), (17, 0)))
    assert adaptive.threshold_config(3, 16) == two_tiers
    assert depth.config_file(two_tiers)[0] == depth.config_file(
        adaptive.threshold_config(3, 16))[0]


def test_effective_tiers_follow_the_padding() -> None:
    routed = adaptive.effective_tiers(depth.schedule_config(SCHEDULE), GRAPHS_64, 5)
    assert routed == [(1, 8, 5), (9, 32, 3), (33, 64, 1), (65, None, 0)]
    # A tier from 10 takes batch 9 too (9 pads to 10), one from 16 takes 15 (15 pads to 16).
    moved = ((1, 5), (10, 3), (16, 1))
    assert adaptive.effective_tiers(depth.schedule_config(moved), GRAPHS_64, 5) == [
        (1, 8, 5), (9, 14, 3), (15, None, 1)]
    lines = depth.depth_notes("eagle3__depth", {"speculative_depth": [list(t) for t in moved],
                                                "args": EAGLE3})
    assert lines == [
        "eagle3__depth: speculative depth by running batch as SGLang routes it: 1-8: 5, "
        "9-14: 3, 15+: 1 (speculative CUDA-graph sizes up to 64)",
        "eagle3__depth: speculative_depth tier from batch 10 starts at batch 9: SGLang pads a "
        "running batch to its captured CUDA-graph size before it picks the tier",
        "eagle3__depth: speculative_depth tier from batch 16 starts at batch 15: SGLang pads a "
        "running batch to its captured CUDA-graph size before it picks the tier"]


@pytest.mark.parametrize(("override", "version", "field"), [
    ({"speculative_algorithm": "NGRAM"}, "0.5.23", "speculative_algorithm"),
    ({"speculative_eagle_topk": 4}, "0.5.23", "speculative_eagle_topk"),
    ({"speculative_adaptive": True}, "0.5.23", "speculative_adaptive"),
    ({}, "0.5.13", "speculative_depth"),  # a depth-0 tier needs adaptive step 0 (0.5.14)
])
def test_a_schedule_sglang_would_drop_or_refuse_is_refused(override: dict, version: str,
                                                            field: str) -> None:
    with pytest.raises(FlagError) as e:
        depth.schedule_file({**EAGLE3, **override}, SCHEDULE, version)
    assert e.value.field == field


def test_one_setting_of_the_depth_by_batch_at_a_time() -> None:
    with pytest.raises(FlagError, match="speculative_disable_above_batch and speculative_depth"):
        server_args(request(disable_above_batch=16, depth_schedule=SCHEDULE))


def test_runtime_adaptation_needs_eagle_topk1_and_steps_among_the_candidates(tmp_path: Path
                                                                           ) -> None:
    fields = server_args(request(adaptive=True))
    assert fields["speculative_adaptive"] is True
    assert "speculative_adaptive_config" not in fields  # SGLang's default tiers
    # SGLang's default union is {0, 1, 3, 5, 7}: 2 steps would make SGLang refuse to start.
    with pytest.raises(FlagError, match=r"num_steps=2 is not among .*\[0, 1, 3, 5, 7\]"):
        depth.check_adaptive_args({**EAGLE3, "speculative_num_steps": 2}, None, None)
    for bad, field in (({"speculative_algorithm": "STANDALONE"}, "speculative_algorithm"),
                       ({"speculative_eagle_topk": 8}, "speculative_eagle_topk")):
        with pytest.raises(FlagError) as e:
            depth.check_adaptive_args({**EAGLE3, **bad}, None, None)
        assert e.value.field == field
    own = tmp_path / "tiers.json"
    own.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}, "ema_alpha": 0.5}))
    config = depth.read_config(str(own))
    fields = server_args(request({**EAGLE3, "speculative_num_steps": 2}, adaptive=True), config)
    assert fields["speculative_adaptive_config"].startswith("{files}/adaptive-")
    own.write_text(json.dumps({"1": {"candidate_steps": []}}))
    with pytest.raises(ValueError, match="tiers.json"):
        depth.read_config(str(own))


# --------------------------------------------------------------------------- vs SGLang itself
SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(os.pathsep)[0]
needs_sglang = pytest.mark.skipif(not SGLANG_PYTHON,
                                  reason="SPECGRID_SGLANG_PYTHON is not set")

# In the engine environment: SGLang 0.5.23's own loader (resolve_candidate_steps_from_config),
# router (AdaptiveSpeculativeParams, set_cuda_graph_bs, get_steps_for_batch) and the rule by
# which it drops adaptive speculation (adaptive_unsupported_reason), on a stand-in for its
# ServerArgs (the views it resolves through are identity on a plain namespace; no attention DP).
_PROBE = r"""
import json, sys, types
from sglang.srt.speculative import adaptive_spec_params as asp
asp.resolving_view = asp.resolved_view = lambda s: s
asp.attn_dp_enabled_of = lambda s: False
asp.log_info_on_rank0 = lambda *a, **k: None
req = json.load(sys.stdin)
p = asp.AdaptiveSpeculativeParams(initial_steps=req["steps"], cfg_path=req["path"])
p.set_cuda_graph_bs(req["graphs"])
reasons = {}
for algo, topk in req["variants"]:
    ns = types.SimpleNamespace(speculative_algorithm=algo, speculative_eagle_topk=topk,
                               enable_multi_layer_eagle=False, enable_two_batch_overlap=False,
                               enable_pdmux=False)
    reasons[f"{algo}/{topk}"] = asp.adaptive_unsupported_reason(ns)
print(json.dumps({"union": asp.resolve_candidate_steps_from_config(req["path"]),
                  "depths": [p.get_steps_for_batch(b) for b in range(1, 101)],
                  "reasons": reasons}))
"""


@needs_sglang
def test_sglangs_own_router_pins_the_schedules_depth_per_batch(tmp_path: Path) -> None:
    name, text = depth.schedule_file(EAGLE3, SCHEDULE, "0.5.23")
    path = tmp_path / name
    path.write_text(text)
    variants = [("EAGLE3", 1), ("EAGLE", None), ("NGRAM", 1), ("EAGLE3", 4)]
    proc = subprocess.run(
        [SGLANG_PYTHON, "-c", _PROBE], capture_output=True, text=True, timeout=600, check=False,
        input=json.dumps({"path": str(path), "steps": 5, "graphs": GRAPHS_64,
                          "variants": variants}))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["depths"] == EXPECTED
    assert 5 in got["union"]  # --speculative-num-steps 5 passes SGLang's union check
    # SGLang drops adaptive for exactly the variants specgrid refuses.
    for algo, topk in variants:
        refused = got["reasons"][f"{algo}/{topk}"] is not None
        try:
            depth.check_adaptive_args({"speculative_algorithm": algo,
                                       "speculative_eagle_topk": topk}, None, None)
            ours = False
        except FlagError:
            ours = True
        assert refused == ours, (algo, topk)


def test_the_plan_says_which_depths_sglangs_adaptation_may_choose() -> None:
    assert depth.depth_notes("eagle3__adaptive", {"speculative_adaptive": True,
                                                  "args": EAGLE3}) == [
        "eagle3__adaptive: SGLang adapts the speculative depth at run time by an EMA of "
        "accepted drafts, among the candidates of each tier (its default): 1+: {1, 3, 5, 7}, "
        "8+: {0, 1, 3}, 32+: {0, 1}, 64+: {0}"]


def test_the_engines_depth_setting_routes_as_sglang_pads() -> None:
    # SGLang's and the simulator's Engine.depth_setting (engines/sglang/semantics.py): the
    # flags and the one file that pin SCHEDULE, and the routed tiers of EXPECTED above (max_bs
    # 64: an unknown GPU's 160 lowered to max_running_requests; the h100 profile's 80 GiB
    # gives 256, lowered to 64 too).
    import engines

    for name, options in (("sglang", {}), ("sim", {"hardware": "h100"})):
        setting = engines.get(name).depth_setting(request(depth_schedule=SCHEDULE,
                                                          options=options))
        assert setting is not None and setting.engine == name
        assert setting.tiers == ((1, 8, 5), (9, 32, 3), (33, 64, 1), (65, None, 0))
        assert "--speculative-adaptive" in setting.flags and len(setting.files) == 1
        text = next(iter(setting.files.values()))
        assert json.loads(text) == {"1": {"candidate_steps": [5]}, "9": {"candidate_steps": [3]},
                                    "33": {"candidate_steps": [1]},
                                    "65": {"candidate_steps": [0]}}
