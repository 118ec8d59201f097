"""k = 0 (conf/variant/eagle3_k0.yaml): speculation configured with zero draft tokens, which
SGLang 0.5.23 runs and the simulator runs the same way.

What SGLang 0.5.23 does (read in its source):
- python/sglang/srt/arg_groups/speculative_hook.py ``_handle_eagle_family``: no check on
  ``speculative_num_steps`` for EAGLE/EAGLE3; at topk 1 ``speculative_num_draft_tokens`` is set
  to steps + 1 = 1. Nothing refuses 0.
- srt/speculative/draft_utils.py ``create_decode_backend``: "No multi-step draft backend for
  steps=0 (nospec) or steps=1"; eagle_worker_v2.py ``_capture_cuda_graphs`` captures no draft
  decode graph below 2 steps.
- srt/speculative/eagle_worker_v2.py ``forward_batch_generation``: with
  ``speculative_num_steps == 0`` it builds ``_build_trivial_verify_input`` (a 1-node verify
  "functionally a plain decode", through the TARGET_VERIFY graph) and still runs the draft
  head's ``_draft_extend_for_decode`` "keeping draft KV warm", unless
  ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`` stubs it.
- srt/managers/tokenizer_manager.py ``_calculate_spec_decoding_metrics``: proposed =
  verify_ct x (num_draft_tokens - 1) = 0, so of the speculative fields only
  ``spec_correct_drafts_histogram`` = [verify_ct] reaches meta_info.
"""

from __future__ import annotations

import httpx
import pytest
import yaml

from engines.sim.cli import resolve
from engines.sim.core import SimEngine
from engines.sim.profile import load_profile
from tests.engines.sim.conftest import REPO, LaunchSim, sse_json

VARIANT = yaml.safe_load((REPO / "conf" / "variant" / "eagle3_k0.yaml").read_text())
FLAGS = [f for k, v in VARIANT["args"].items() for f in (f"--{k.replace('_', '-')}", str(v))]


def test_the_variant_is_eagle3_with_zero_draft_steps() -> None:
    assert VARIANT["args"]["speculative_algorithm"] == "EAGLE3"
    assert VARIANT["args"]["speculative_num_steps"] == 0
    assert VARIANT["args"]["speculative_num_draft_tokens"] == 1


def test_the_simulator_starts_it_and_reports_only_the_histogram(launch_sim: LaunchSim) -> None:
    sim = launch_sim([*FLAGS, "--sim-time-scale", "0"])
    r = httpx.post(sim.url + "/generate", timeout=30, json={
        "text": "def f(x):", "stream": True,
        "sampling_params": {"max_new_tokens": 20, "ignore_eos": True, "temperature": 0}})
    chunks = sse_json(r.content)
    # one token per step: the prefill's, then 19 one-token verifies, each 0 drafts accepted
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 21))
    last = chunks[-1]["meta_info"]
    assert last["spec_correct_drafts_histogram"] == [19]
    assert not {"spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts",
                "spec_num_proposed_drafts", "spec_verify_ct"} & set(last)
    info = httpx.get(sim.url + "/server_info").json()
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (0, 1)


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_the_step_is_a_decode_plus_the_draft_extend_and_the_fixed_speculative_cost(
        batch: int) -> None:
    zero = SimEngine(resolve(FLAGS, env={}))
    plain = SimEngine(resolve(["--max-running-requests", "64"], env={}))
    skip = SimEngine(resolve(FLAGS, env={"SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND": "1"}))
    kv = batch * 1024.0
    fixed = zero.roofline.hw.efficiency.zero_step_overhead_ms * 1e-3
    step = zero.model.spec_step_s(batch, 0, 1, kv)
    # the trivial verify reads what a decode step reads; the draft head extends every request
    # by its one verified token; no draft step runs and no draft token is verified: the
    # zero-step path's own fixed cost stands for the drafting step's and the per-token one
    assert step == pytest.approx(plain.model.decode_s(batch, kv) + fixed
                                 + zero.roofline.draft_pass_s(batch, kv))
    assert skip.core.skip_zero_step_extend
    assert skip.model.spec_step_s(batch, 0, 1, kv, draft_extend=False) == pytest.approx(
        plain.model.decode_s(batch, kv) + fixed)


def test_the_default_nodes_zero_step_by_hand() -> None:
    # batch 1, 1,024 cached tokens, the default pair (8x RTX PRO 6000, Kimi-K2.5-class):
    # the draft extend reads the 1.0 B-parameter head in bf16 over 8 GPUs (0.25 GB) and its one
    # layer's MLA latents (1,024 x 70,272 / 61 bytes = 1.18 MB, replicated) at 1,792 GB/s x
    # 0.5005 = 0.2800 ms, runs 2 NCCL all-reduces of 7,168 x 2 bytes (35 us + 2 x 7/8 x 14,336 B
    # / 22 GB/s = 36.1 us each) and its 0.2 ms fixed cost: 0.5523 ms; the zero-step path's
    # fixed cost adds 0.4 ms.
    zero = SimEngine(resolve(FLAGS, env={}))
    plain = SimEngine(resolve(["--max-running-requests", "64"], env={}))
    extra = zero.model.spec_step_s(1, 0, 1, 1024.0) - plain.model.decode_s(1, 1024.0)
    assert extra == pytest.approx(0.2800e-3 + 0.0723e-3 + 0.2e-3 + 0.4e-3, rel=0.005)


# Every grid pair (conf/hardware's GPU kinds x conf/model's simulated models) and Qwen3-30B-A3B
# on 2 H100, the node of the published tree-vs-chain figures (bench/sim_forced_published.py).
PAIRS = [(hw, model, tp) for hw in ("rtx-pro-6000", "h100", "h200")
         for model, tp in (("kimi-k2.5-class", 8), ("llama3.1-8b", 1), ("llama3.3-70b", 8))]
PAIRS.append(("h100", "qwen3-30b-a3b", 2))


@pytest.mark.parametrize(("hardware", "model", "tp"), PAIRS)
def test_the_zero_step_path_costs_what_users_report(hardware: str, model: str, tp: int) -> None:
    """k = 0 (and a threshold's or a depth-0 tier's zero-step path) over a plain decode step:
    4-11 % at batch 1 to 8, the range users report for speculation configured with zero draft
    tokens against speculation off (vLLM, TensorRT-LLM; docs/simulator.md "The speculative step
    from its parts"), and at most 25 % at batch 64, where no report measured it."""
    rl = load_profile("default", hardware, model).roofline(tp, {}, {})[0]
    for batch in (1, 2, 4, 8, 64):
        kv = batch * 1024.0
        over = rl.spec_step_s(batch, 0, 1, kv) / rl.decode_s(batch, kv) - 1
        if batch <= 8:
            assert 0.04 <= over <= 0.11, (batch, over)
        else:
            assert 0.0 < over <= 0.25, (batch, over)


def test_a_forced_length_at_k0_is_one() -> None:
    from engines.forced import forced_acceptance

    forced = forced_acceptance({"length": 1.0}, VARIANT["args"])
    assert forced is not None and forced.steps == 0 and forced.per_position() == ()
    with pytest.raises(ValueError, match=r"must be in \[1, 1\]"):
        forced_acceptance({"length": 1.5}, VARIANT["args"])
