"""The roofline step cost (engines/sim/roofline.py): memory-bound at small batch, compute-bound
at large, KV reads growing with context, MoE expert coverage, custom all-reduce vs NCCL, the
NCCL environment multipliers, speculative steps and KV capacity."""

from __future__ import annotations

import pytest

from engines.sim.model import PerfModel, nccl_multiplier
from engines.sim.profile import load_profile
from engines.sim.roofline import GB, Roofline, touched_experts

H100_LLAMA = load_profile("default", "h100", "llama3.1-8b")
DEFAULT = load_profile("default")


def roofline(profile=H100_LLAMA, tp: int = 1, env=None, flags=None) -> Roofline:  # type: ignore[no-untyped-def]
    return profile.roofline(tp, env or {}, flags or {})[0]


def split(rl: Roofline, tokens: int, kv: float) -> tuple[float, float]:
    """(memory time, compute time) of one pass, recomputed from the profile's datasheet
    numbers (not from the code's own terms)."""
    m, hw = rl.model, rl.hw
    weights = m.dense_params_b * 1e9 * m.weight_bytes / rl.tp
    kv_b = kv * 2 * m.kv_heads * m.head_dim * 2 * m.layers / min(rl.tp, m.kv_heads)
    mem = (weights + kv_b) / (hw.hbm_gbs * GB * hw.efficiency.bandwidth)
    comp = 2 * m.dense_params_b * 1e9 * tokens / rl.tp / (hw.peak_tflops["bf16"] * 1e12
                                                          * hw.efficiency.compute)
    return mem, comp


def test_memory_bound_at_small_batch_compute_bound_at_large() -> None:
    rl = roofline()
    mem1, comp1 = split(rl, 1, 1024)
    assert mem1 > 10 * comp1  # one token: weights dominate
    over = rl.hw.efficiency.pass_overhead_ms / 1000
    assert rl.target_pass_s(1, 1024) == pytest.approx(mem1 + over, rel=0.02)
    mem4k, comp4k = split(rl, 4096, 0)
    assert comp4k > 3 * mem4k
    assert rl.target_pass_s(4096, 0, attn_ctx=0) == pytest.approx(comp4k + over, rel=0.02)
    # decode: 8 and 64 sequences cost about the same (memory-bound), 1024 costs more
    d8, d64, d1024 = (rl.decode_s(b, b * 512) for b in (8, 64, 1024))
    assert d64 < 1.5 * d8 and d1024 > 2 * d64


def test_context_length_slows_decode() -> None:
    rl = roofline()
    short, long_ = rl.decode_s(16, 16 * 128), rl.decode_s(16, 16 * 32768)
    kv_extra = 16 * (32768 - 128) * 131072 / (rl.hw.hbm_gbs * GB * rl.hw.efficiency.bandwidth)
    assert long_ - short == pytest.approx(kv_extra, rel=0.05)
    assert long_ > 2 * short


def test_moe_reads_more_experts_as_the_batch_grows() -> None:
    assert touched_experts(384, 8, 1) == pytest.approx(8)
    assert 280 < touched_experts(384, 8, 64) < 290
    assert touched_experts(384, 8, 1000) == pytest.approx(384, rel=0.001)
    rl = roofline(DEFAULT, tp=1)
    assert rl.tp == 8  # the default model stands for a whole node
    assert rl.decode_s(64, 64 * 256) > 3 * rl.decode_s(1, 256)


def test_custom_allreduce_for_small_messages_nccl_for_large() -> None:
    env = {"NCCL_ALGO": "Tree"}
    plain, tree = roofline(tp=8), roofline(tp=8, env=env)
    assert tree.nccl_multiplier < 1.0
    small, large = 16 * 4096 * 2, 64 * 1024 * 1024
    assert tree.allreduce_s(small) == plain.allreduce_s(small)  # custom all-reduce
    assert tree.allreduce_s(large) < plain.allreduce_s(large)  # NCCL
    forced = roofline(tp=8, flags={"disable_custom_all_reduce": True})
    assert forced.allreduce_s(small) > plain.allreduce_s(small)
    # 8 PCIe GPUs: SGLang disables custom all-reduce, so the env acts on every all-reduce
    pcie, pcie_tree = roofline(DEFAULT), roofline(DEFAULT, env=env)
    assert pcie_tree.allreduce_s(small) < pcie.allreduce_s(small)
    assert roofline(tp=1).allreduce_s(large) == 0.0


def test_nccl_multiplier_tables() -> None:
    tables = DEFAULT.comm_multipliers
    assert nccl_multiplier(tables, {}, {})[0] == 1.0
    tree, rec = nccl_multiplier(tables, {"NCCL_ALGO": "Tree"}, {})
    assert tree < 1.0 and "env:NCCL_ALGO=Tree" in rec
    assert nccl_multiplier(tables, {"NCCL_ALGO": "ring,tree"}, {})[0] == tree
    assert nccl_multiplier(tables, {"NCCL_ALGO": "^NVLS"}, {})[0] == 1.0
    assert nccl_multiplier(tables, {"NCCL_PROTO": "Simple"}, {})[0] > 1.0
    assert nccl_multiplier(tables, {"NCCL_P2P_LEVEL": "LOC"}, {})[0] > 1.1
    assert nccl_multiplier(tables, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, {})[0] == 1.0
    fused = nccl_multiplier(tables, {}, {"flashinfer_allreduce_fusion_backend": "trtllm"})[0]
    assert fused < 1.0


def test_speculative_step_costs() -> None:
    m = PerfModel(roofline(DEFAULT))
    kv = 32 * 512
    assert m.spec_step_s(1, 3, 4, 512) < m.spec_step_s(48, 3, 4, 48 * 512)
    assert m.spec_step_s(16, 3, 4, 16 * 512) < m.spec_step_s(16, 7, 8, 16 * 512)
    # a step-0 tier is not free: 1-token verify + draft extend + the spec path's overhead
    zero, no_extend = m.spec_step_s(32, 0, 1, kv), m.spec_step_s(32, 0, 1, kv,
                                                                  draft_extend=False)
    assert m.decode_s(32, kv) < no_extend < zero
    assert m.prefill_s(128) < m.prefill_s(8192)
    assert PerfModel(roofline(DEFAULT), cuda_graph=False).decode_s(1, 256) > m.decode_s(1, 256)


def test_kv_capacity_from_mem_fraction_static() -> None:
    rl = roofline()
    small, big = rl.kv_capacity_tokens(0.5), rl.kv_capacity_tokens(0.9)
    assert 0 < small < big
    per_token = 131072  # llama3.1-8b: 2 x 8 heads x 128 x 2 bytes x 32 layers
    free = (rl.hw.memory_gib * 2**30 * 0.9 - (8.03e9 + 0.40e9) * 2)
    assert big == pytest.approx(free / per_token, rel=0.01)
    assert rl.kv_capacity_tokens(0.1) == 0  # the weights alone do not fit
