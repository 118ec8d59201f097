"""What a tree (speculative_eagle_topk > 1) costs on top of a chain of the same depth
(engines/sim/roofline.py ``Roofline.tree_overhead_s`` and the draft's KV reads per branch),
pinned on hand-worked numbers: the kernel counts of SGLang 0.5.23's tree path at
``tree_kernel_us`` each, and nothing at all for a chain."""

from __future__ import annotations

import pytest

from engines.sim.profile import load_profile
from engines.sim.roofline import Efficiency, Hardware, Interconnect, Model, Roofline


def tiny(draft_params_b: float = 0.0) -> Roofline:
    """Two target layers, one draft layer, one KV head of 128 dims (512 bytes of K+V per token
    per layer in bf16), 1000 GB/s at full efficiency and compute so fast it never binds."""
    hw = Hardware(name="t", hbm_gbs=1000.0, memory_gib=80.0, peak_tflops={"bf16": 1e9},
                  interconnect=Interconnect(),
                  efficiency=Efficiency(bandwidth=1.0, compute=1.0, tree_kernel_us=5.0,
                                        spec_token_overhead_us=10.0))
    model = Model(name="t", layers=2, hidden=128, heads=1, kv_heads=1, head_dim=128,
                  dense_params_b=0.001, draft_params_b=draft_params_b, draft_layers=1)
    return Roofline(hw, model)


def test_a_chain_costs_what_it_did() -> None:
    rl = tiny(draft_params_b=0.001)
    assert rl.tree_overhead_s(3, 1) == 0.0
    # the chain's step, recomposed from the passes it is made of (4 requests, 3 steps, 4 draft
    # tokens each, 4000 cached tokens; 12 of the 16 verified tokens are drafts): unchanged to
    # the float
    eff = rl.hw.efficiency
    chain = (rl.target_pass_s(16, 4000, attn_ctx=1000.0) + 3 * rl.draft_pass_s(4, 4000)
             + rl.draft_pass_s(16, 4000) + eff.spec_step_overhead_ms * 1e-3
             + 12 * eff.spec_token_overhead_us * 1e-6)
    assert rl.spec_step_s(4, 3, 4, 4000, topk=1) == chain


def test_a_tree_adds_its_kernels() -> None:
    rl = tiny()
    # 3 steps, topk 4: the cascade's 4 kernels in each of the 2 target layers and in the draft
    # layer of the 2 draft-decode forwards (8 + 8), 6 expansion kernels per draft forward (12),
    # 11 per step for the tree build: 39 kernels x 5 us
    assert rl.tree_overhead_s(3, 4) == pytest.approx(195e-6)
    # no draft head (draft_params_b 0): the draft passes cost nothing; with the same 8 tokens
    # verified (7 drafts each), the step differs from the chain's by exactly the tree's kernels
    assert rl.spec_step_s(4, 3, 8, 4000, topk=4) - rl.spec_step_s(4, 3, 8, 4000, topk=1) == \
        pytest.approx(195e-6)
    # a CPU drafter (NGRAM, draft_scale 0) keeps only the target verify's 8 kernels
    assert rl.tree_overhead_s(3, 4, draft_scale=0.0) == pytest.approx(40e-6)


def test_each_branch_reads_the_prefix() -> None:
    rl = tiny(draft_params_b=0.001)
    # one step (no draft-decode forward: the tree adds 4 x 2 + 11 = 19 kernels = 95 us); the
    # draft pass reads 1e6 cached tokens x 512 bytes once per branch: 3 more reads at topk 4
    # = 1.536 GB at 1000 GB/s
    extra = rl.spec_step_s(1, 1, 5, 1e6, topk=4) - rl.spec_step_s(1, 1, 5, 1e6, topk=1)
    assert extra == pytest.approx(1.536e-3 + 95e-6, rel=1e-6)


def test_the_h200_llama70b_tree_of_three_steps() -> None:
    rl = load_profile("default", "h200", "llama3.3-70b").roofline(8, {}, {})[0]
    # 80 target layers, 1 draft layer: 4 x (80 + 2) + 6 x 2 + 11 = 351 kernels x 5 us
    assert rl.tree_overhead_s(3, 4) == pytest.approx(1.755e-3)
    assert rl.tree_overhead_s(3, 3) == rl.tree_overhead_s(3, 4)
