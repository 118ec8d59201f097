"""Step cost from first principles: a hardware profile and a model profile give the time of one
forward pass (a roofline of bytes and FLOPs per GPU of a tensor-parallel group, plus its
all-reduces and a fixed overhead), and a decode, prefill or speculative step is a sum of
forward passes. The formula, the all-reduce paths and what each term reads: docs/simulator.md
"Step cost". The few fitted numbers are efficiency factors (``Efficiency``; docs/simulator.md
"Fitted factors"); a tree (topk > 1) adds the kernels SGLang's tree path launches on top of a
chain's, counted from its source (TREE_*, ``Roofline.tree_overhead_s``), at an assumed
``tree_kernel_us`` each. Everything else is a datasheet or config.json number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

GB = 1e9
ACT_BYTES = 2
"""Activations and all-reduce messages are bf16."""

# What a tree (speculative_eagle_topk > 1) launches on top of a chain in SGLang 0.5.23, counted
# from its source (python/sglang/srt/...). On Hopper a chain runs FA3 and a tree FlashInfer
# (arg_groups/model_override_base.py get_default_attn_backend: FA3 only when
# utils/common.py is_no_spec_infer_or_topk_one); FA3's own tree path is the count below.
TREE_ATTN_KERNELS_PER_LAYER = 4
"""Per attention layer of the target verify and of each draft-decode forward: FA3's cascade
(layers/attention/flashattention_backend.py forward_extend / forward_decode,
``use_cascade_attn``) adds a second flash_attn_with_kvcache over the per-token expand page
table, two ``softmax_lse.T.contiguous()`` copies and merge_state_v2 to the chain's one causal
call. It stands in for FlashInfer's tree-masked prefill kernel, which SGLang keeps off Hopper
for chains because it is slower there (the comment in get_default_attn_backend)."""
TREE_EXPAND_KERNELS_PER_STEP = 6
"""Per draft forward (steps - 1 of them, speculative/eagle_worker_v2.py draft_forward): the
chain's one fused draft_topk1_postprocess becomes softmax (spec_utils.py renorm_draft_probs),
torch.topk (utils/common.py fast_topk) and the position increment, and the tree expansion
(spec_utils.py _select_top_k_tokens_later: score product, top-k of topk^2, gathers of the ids
and of the hidden states, ~4 compiled kernels) runs, which the chain skips."""
TREE_BUILD_KERNELS = 11
"""Once per step: eagle_utils.py organize_draft_results (2 cats, topk, sort, gather, the
parents' cat = 6; the chain returns preallocated indices), the first step's
repeat_interleave of the hidden states (spec_utils.py _select_top_k_tokens_first), and
build_tree_kernel_efficient's FULL_MASK tree mask (eagle_worker_common.py
build_eagle_verify_input: cat, mask fill, retrieve buffer, and the mask's packing when
flashinfer_backend.py FlashInferIndicesUpdaterPrefill.call_begin_forward hands it to the
wrapper's plan = 4 more than the chain's one build_chain_tree)."""


def _pick(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class Efficiency:
    """Fitted factors: how close the kernels get to the roofline (docs/simulator.md)."""

    bandwidth: float = 0.8
    """Fraction of peak HBM bandwidth reached by weight and KV reads."""
    compute: float = 0.6
    """Fraction of peak dense FLOPs (of the model's compute dtype) reached by the GEMMs."""
    pass_overhead_ms: float = 1.0
    """Fixed cost of one forward pass with CUDA graphs: graph replay, sampling, scheduling."""
    spec_step_overhead_ms: float = 2.0
    """Fixed cost of one drafting step of the speculative path beyond its forwards (scheduling
    the draft loop, building the verify input and tree, the verify's accept sampling and
    bookkeeping), whatever its depth or batch."""
    zero_step_overhead_ms: float = 0.1
    """Fixed cost of a step of SGLang's zero-step path (k = 0, a depth-0 tier, a threshold's
    upper tier) beyond a plain decode's: it builds a trivial verify input and skips the draft
    loop, the tree and the accept sampling. Set from the zero-draft reports (docs/simulator.md
    "The speculative step from its parts"), not fitted."""
    draft_pass_overhead_ms: float = 0.2
    """Fixed cost of one draft-head forward, a draft step's or the extend's (its multi-step
    draft is one captured graph)."""
    spec_token_overhead_us: float = 0.0
    """Speculative-path cost per verified draft token (a verify's tokens beyond each request's
    first, which a plain decode also samples) outside the target forward: verification
    sampling over the vocabulary, logits gathered across TP, per-token accept bookkeeping."""
    eager_layer_overhead_us: float = 60.0
    """Extra kernel-launch cost per layer when the pass runs without a CUDA graph."""
    tree_kernel_us: float = 5.0
    """GPU time of one of the small kernels a tree step (topk > 1) adds to a chain's
    (``Roofline.tree_overhead_s``): a node of a replayed CUDA graph, its launch gap plus a
    tiny kernel's run. Assumed: the same per-kernel cost as ``eager_layer_overhead_us``
    (60 us for the ~12 kernels of a Llama decoder layer)."""
    request_overhead_ms: float = 0.0
    """Time each request spends outside the engine's steps before it is scheduled: the HTTP
    round trip, tokenization, the client's turn-around. 0 for the shipped GPU profiles (their
    anchors are engine-side throughputs); a twin fits it: on a 2-core CPU host whose client
    shares the cores with the engine it is tens of milliseconds (docs/twin.md)."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Efficiency:
        return cls(**{k: float(v) for k, v in _pick(cls, data).items()})


@dataclass(frozen=True)
class Interconnect:
    """The links between the GPUs of one tensor-parallel group."""

    kind: str = "nvlink"
    """``nvlink`` (fully connected) or ``pcie``."""
    custom_allreduce_latency_us: float = 8.0
    """One custom all-reduce of a small message (one-shot, peer-to-peer)."""
    custom_allreduce_max_bytes: float = 8 * 1024 * 1024
    """Largest message SGLang's custom all-reduce takes (larger ones go to NCCL)."""
    link_gbs: float = 450.0
    """Per-GPU link bandwidth (GB/s, one direction) seen by the custom all-reduce."""
    nccl_latency_us: float = 20.0
    """NCCL all-reduce latency of a small message (default algorithm and protocol)."""
    nccl_bus_gbs: float = 350.0
    """NCCL all-reduce bus bandwidth (GB/s) for large messages."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Interconnect:
        d = _pick(cls, data)
        kind = str(d.pop("kind", "nvlink"))
        return cls(kind, **{k: float(v) for k, v in d.items()})

    def custom_allreduce(self, tp: int) -> bool:
        return self.kind == "nvlink" or tp <= 2


@dataclass(frozen=True)
class Hardware:
    """One GPU kind and its interconnect (engines/sim/profiles/hardware/*.json)."""

    name: str
    hbm_gbs: float
    """Peak HBM bandwidth, GB/s."""
    memory_gib: float
    """GPU memory, GiB."""
    peak_tflops: Mapping[str, float]
    """Peak dense tensor FLOPs by dtype (bf16, fp8, fp4), TFLOP/s."""
    interconnect: Interconnect
    efficiency: Efficiency
    comm_multipliers: Mapping[str, Any] = field(default_factory=dict)
    """NCCL_* environment / flag -> multiplier tables on the NCCL all-reduce time."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Hardware:
        return cls(
            name=str(data["name"]), hbm_gbs=float(data["hbm_gbs"]),
            memory_gib=float(data["memory_gib"]),
            peak_tflops={k: float(v) for k, v in data["peak_tflops"].items()},
            interconnect=Interconnect.from_mapping(data.get("interconnect", {})),
            efficiency=Efficiency.from_mapping(data.get("efficiency", {})),
            comm_multipliers=data.get("comm_multipliers", {}),
        )

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (falls back to bf16)."""
        return self.peak_tflops.get(dtype, self.peak_tflops["bf16"]) * 1e12


@dataclass(frozen=True)
class Model:
    """Shape of a served model and of its draft head (engines/sim/profiles/model/*.json)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    dense_params_b: float
    """Parameters read for every token (attention, shared experts, dense MLPs, embeddings,
    lm_head), billions."""
    weight_bytes: float = 2.0
    """Bytes per dense parameter (bf16 2, fp8 1)."""
    compute_dtype: str = "bf16"
    kv_bytes_per_token: float = 0.0
    """KV-cache bytes per token over all layers (0: 2 x kv_heads x head_dim x 2 x layers)."""
    kv_replicated: bool = False
    """MLA latents are not split by heads: every TP rank reads the whole KV of a token."""
    experts: int = 0
    experts_per_token: int = 0
    expert_params_m: float = 0.0
    """Parameters of one routed expert, millions."""
    moe_layers: int = 0
    expert_weight_bytes: float = 2.0
    """Bytes per routed-expert parameter (INT4 with scales ~0.53)."""
    draft_params_b: float = 0.0
    """Parameters of the draft head (EAGLE-3: one decoder layer, fc, draft lm_head)."""
    draft_layers: int = 1
    node_tp: int = 0
    """>0: the profile stands for this many GPUs whatever --tp-size says (a whole node)."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Model:
        return cls(**_pick(cls, data))

    @property
    def active_params(self) -> float:
        routed = self.moe_layers * self.experts_per_token * self.expert_params_m * 1e6
        return self.dense_params_b * 1e9 + routed

    @property
    def kv_token_bytes(self) -> float:
        if self.kv_bytes_per_token:
            return self.kv_bytes_per_token
        return 2.0 * self.kv_heads * self.head_dim * 2 * self.layers

    def weight_bytes_total(self) -> float:
        experts = self.moe_layers * self.experts * self.expert_params_m * 1e6
        return self.dense_params_b * 1e9 * self.weight_bytes + experts * self.expert_weight_bytes


def touched_experts(experts: int, per_token: int, tokens: float) -> float:
    """Expected distinct experts hit when ``tokens`` tokens each pick ``per_token`` of
    ``experts`` (uniform routing)."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


@dataclass(frozen=True)
class Roofline:
    """Forward-pass times (seconds) of one model on one hardware at one TP size."""

    hw: Hardware
    model: Model
    tp: int = 1
    nccl_multiplier: float = 1.0
    """Product of the NCCL environment/flag multipliers that apply (1 = NCCL defaults)."""
    custom_ar_multiplier: float = 1.0
    """Flag multiplier on the custom all-reduce path (e.g. --disable-custom-all-reduce)."""
    force_nccl: bool = False
    """--disable-custom-all-reduce: every all-reduce goes through NCCL."""

    def with_efficiency(self, **kw: float) -> Roofline:
        return replace(self, hw=replace(self.hw, efficiency=replace(self.hw.efficiency, **kw)))

    @property
    def kv_split(self) -> int:
        """GPUs one token's KV is split over: grouped-query heads split over tp, MLA latents
        are replicated."""
        m = self.model
        return 1 if m.kv_replicated else min(self.tp, max(1, m.kv_heads))

    # ------------------------------------------------------------------ pieces
    def allreduce_s(self, nbytes: float) -> float:
        """One all-reduce of ``nbytes`` across the TP group."""
        tp = self.tp
        if tp <= 1:
            return 0.0
        ic = self.hw.interconnect
        if (not self.force_nccl and ic.custom_allreduce(tp)
                and nbytes <= ic.custom_allreduce_max_bytes):
            t = ic.custom_allreduce_latency_us * 1e-6 + nbytes / (ic.link_gbs * GB)
            return t * self.custom_ar_multiplier
        t = ic.nccl_latency_us * 1e-6 + 2.0 * (tp - 1) / tp * nbytes / (ic.nccl_bus_gbs * GB)
        return t * self.nccl_multiplier

    def target_pass_s(self, tokens: float, kv_tokens: float, graph: bool = True,
                      attn_ctx: float | None = None) -> float:
        """One target-model forward over ``tokens`` new tokens reading ``kv_tokens`` cached
        tokens in total. ``attn_ctx`` = context each new token attends to (default: the KV
        read spread over the tokens)."""
        m, hw, tp = self.model, self.hw, self.tp
        eff = hw.efficiency
        expert_bytes = (m.moe_layers * touched_experts(m.experts, m.experts_per_token, tokens)
                        * m.expert_params_m * 1e6 * m.expert_weight_bytes)
        weights = (m.dense_params_b * 1e9 * m.weight_bytes + expert_bytes) / tp
        kv = kv_tokens * m.kv_token_bytes / self.kv_split
        mem_s = (weights + kv) / (hw.hbm_gbs * GB * eff.bandwidth)
        ctx = attn_ctx if attn_ctx is not None else (kv_tokens / tokens if tokens else 0.0)
        flops = (2.0 * m.active_params * tokens
                 + 4.0 * tokens * ctx * m.heads * m.head_dim * m.layers) / tp
        comp_s = flops / (hw.peak(m.compute_dtype) * eff.compute)
        ar = 2 * m.layers * self.allreduce_s(tokens * m.hidden * ACT_BYTES)
        over = eff.pass_overhead_ms * 1e-3
        if not graph:
            over += m.layers * eff.eager_layer_overhead_us * 1e-6
        return max(mem_s, comp_s) + ar + over

    def draft_pass_s(self, tokens: float, kv_tokens: float, graph: bool = True) -> float:
        """One forward of the draft head (a small dense model, same TP as the target)."""
        m, hw, tp = self.model, self.hw, self.tp
        if m.draft_params_b <= 0:
            return 0.0
        eff = hw.efficiency
        kv = kv_tokens * m.kv_token_bytes / max(1, m.layers) * m.draft_layers
        kv /= self.kv_split
        mem_s = (m.draft_params_b * 1e9 * 2.0 / tp + kv) / (hw.hbm_gbs * GB * eff.bandwidth)
        comp_s = 2.0 * m.draft_params_b * 1e9 * tokens / tp / (hw.peak("bf16") * eff.compute)
        ar = 2 * m.draft_layers * self.allreduce_s(tokens * m.hidden * ACT_BYTES)
        over = eff.draft_pass_overhead_ms * 1e-3
        if not graph:
            over += m.draft_layers * eff.eager_layer_overhead_us * 1e-6
        return max(mem_s, comp_s) + ar + over

    # ------------------------------------------------------------------ steps
    def decode_s(self, batch: int, kv_tokens: float, graph: bool = True) -> float:
        """One plain decode step: ``batch`` tokens, reading every running sequence's KV."""
        return self.target_pass_s(batch, kv_tokens, graph)

    def prefill_s(self, tokens: int, kv_tokens: float = 0.0, draft: bool = False) -> float:
        """One prefill (or prefill chunk) of ``tokens`` tokens; ``kv_tokens`` = cached prefix
        plus the chunk itself (attention reads). A speculative server prefills the draft too."""
        attn_ctx = kv_tokens / 2 if tokens else 0.0  # causal: on average half the context
        t = self.target_pass_s(tokens, kv_tokens, graph=False, attn_ctx=attn_ctx)
        t -= self.model.layers * self.hw.efficiency.eager_layer_overhead_us * 1e-6
        if draft:
            t += self.draft_pass_s(tokens, kv_tokens)
        return t

    def spec_step_s(self, batch: int, steps: int, draft_tokens: int, kv_tokens: float,
                    topk: int = 1, draft_extend: bool = True, graph: bool = True,
                    draft_scale: float = 1.0) -> float:
        """One speculative step (SGLang's EAGLE worker), from its parts: ``steps`` draft
        forwards of batch x topk rows (drafting costs by depth, not by tokens), one target
        verify over batch x draft_tokens tokens (priced by the roofline), one draft extend
        over the verified tokens, the drafting step's fixed ``spec_step_overhead_ms`` and
        ``spec_token_overhead_us`` per verified draft token (a verify's tokens beyond each
        request's first, which a decode samples too). steps == 0 (SGLang's zero-step path:
        k = 0, an adaptive depth-0 tier, a threshold's upper tier) verifies 1 token per
        request through the verify graph, runs the draft extend unless skipped, and pays
        ``zero_step_overhead_ms`` instead: no draft loop, no tree, no draft token."""
        eff = self.hw.efficiency
        verify_tokens = batch * (draft_tokens if steps > 0 else 1)
        t = self.target_pass_s(verify_tokens, kv_tokens, graph,
                               attn_ctx=kv_tokens / batch if batch else 0.0)
        if draft_extend:
            t += self.draft_pass_s(verify_tokens, kv_tokens, graph) * draft_scale
        if steps <= 0:
            return t + eff.zero_step_overhead_ms * 1e-3
        # Each of the topk branches is its own draft-decode row reading the whole prefix
        # (flashinfer_backend.py FlashInferMultiStepDraftBackend.common_template:
        # bs = topk x num_seqs): the draft's KV reads grow with topk.
        width = max(1, topk)
        t += steps * self.draft_pass_s(batch * width, kv_tokens * width, graph) * draft_scale
        t += self.tree_overhead_s(steps, topk, draft_scale)
        return (t + eff.spec_step_overhead_ms * 1e-3
                + (verify_tokens - batch) * eff.spec_token_overhead_us * 1e-6)

    def tree_overhead_s(self, steps: int, topk: int, draft_scale: float = 1.0) -> float:
        """What one speculative step of a tree (topk > 1) launches on top of a chain of the
        same depth, at ``tree_kernel_us`` per kernel: the cascade's extra attention kernels in
        every layer of the target verify and of the ``steps - 1`` draft-decode forwards, the
        per-forward expansion and the per-step tree build (the TREE_* counts above). The draft
        side scales with ``draft_scale`` (NGRAM drafts on the CPU). 0 for a chain."""
        if topk <= 1 or steps <= 0:
            return 0.0
        m = self.model
        forwards = steps - 1
        draft = (TREE_ATTN_KERNELS_PER_LAYER * m.draft_layers * forwards
                 + TREE_EXPAND_KERNELS_PER_STEP * forwards + TREE_BUILD_KERNELS)
        kernels = TREE_ATTN_KERNELS_PER_LAYER * m.layers + draft * draft_scale
        return kernels * self.hw.efficiency.tree_kernel_us * 1e-6

    # ------------------------------------------------------------------ memory
    def weight_bytes_per_gpu(self) -> float:
        """The weights one GPU holds: the model's and its draft head's (bf16), split over tp.
        The draft head counts with speculation off too, as the KV pool has always been sized."""
        m = self.model
        return (m.weight_bytes_total() + m.draft_params_b * 1e9 * 2.0) / self.tp

    def kv_capacity_tokens(self, mem_fraction_static: float) -> int:
        """KV tokens that fit: (memory x mem_fraction_static - weights per GPU) / KV bytes per
        token per GPU (SGLang's rule: mem_fraction_static covers weights plus the KV pool)."""
        per_gpu = self.hw.memory_gib * 2**30 * mem_fraction_static
        free = per_gpu - self.weight_bytes_per_gpu()
        if free <= 0:
            return 0
        return int(free / (self.model.kv_token_bytes / self.kv_split))


def ms(seconds: float) -> float:
    """Seconds -> milliseconds, rounded for display."""
    return round(seconds * 1000.0, 3) if math.isfinite(seconds) else seconds
