"""The simulator's modelled figures against published ones and across its profiles (SIMULATION
numbers, offline model, no clock).

At a published acceptance length (the default): each row is a published SGLang measurement
that states tok/s and the EAGLE-3 acceptance length together; the simulator serves the same
shape with that length forced (SGLANG_SIMULATE_ACC_LEN, which it honours as SGLang does), so
what it adds is a pure system-cost prediction. Each cell: ``--max-running-requests B`` and B
requests at once (batch B until they finish together), MT-bench-like chat prompts of 128
tokens, 512 output tokens (assumed where the source does not say), ``reps`` simulator seeds.
docs/simulator.md "Checked at a published acceptance length" records the table.

``--step-parts``: the speculative step from its parts, the step-cost function alone
(docs/simulator.md "The speculative step from its parts"): k = 0 (SGLang's zero-step path)
over a plain decode step on every grid pair at batch 1, 8 and 64 with 1,024 cached tokens per
request (users report 4-11 %); chains of K = 2..7 draft steps at batch 1 on one H100,
Llama-3.1-8B-Instruct, against vllm-project/vllm #20780 (EAGLE-3, MT-bench, vLLM, batch 1):
the published step is TPOT x accept length, over a plain decode's TPOT of 7.07 ms.

``--crossover``: where EAGLE-3 (3 steps, topk 1, 4 draft tokens) stops paying, per hardware +
model pair: ``--max-running-requests C`` on both servers, 2 x C coding requests of 128 prompt
and 256 output tokens sent at once, EAGLE-3's modelled tok/s over the baseline's.

    .venv/bin/python bench/sim_forced_published.py [--tree-kernel-us 0] [--trees]
    .venv/bin/python bench/sim_forced_published.py --step-parts
    .venv/bin/python bench/sim_forced_published.py --crossover [--pairs h100:llama3.1-8b] \\
        [--concurrency 1 8 64]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from engines.sim.calibrate import measure, spec_argv, with_efficiency
from engines.sim.profile import load_profile

PR_4716 = "https://github.com/sgl-project/sglang/pull/4716"
SPECFORGE_339 = "https://github.com/sgl-project/SpecForge/issues/339"
ANGELSLIM_163 = "https://github.com/Tencent/AngelSlim/issues/163"
VLLM_20780 = "https://github.com/vllm-project/vllm/issues/20780"
VLLM_DECODE_TPOT_MS = 7.07
VLLM_EAGLE3 = {2: (2.36, 4.32), 3: (2.79, 4.09), 4: (3.08, 4.05), 5: (3.32, 4.13),
               6: (3.46, 4.20), 7: (3.54, 4.29)}
"""K: (accept length, TPOT ms), EAGLE-3 at batch 1."""
CONTEXT = 512
"""Cached tokens of the batch-1 request (an MT-bench prompt and part of its answer; assumed)."""
GRID_PAIRS = [(hw, model, tp) for hw in ("rtx-pro-6000", "h100", "h200")
              for model, tp in (("kimi-k2.5-class", 8), ("llama3.1-8b", 1), ("llama3.3-70b", 8))]
GRID_PAIRS.append(("h100", "qwen3-30b-a3b", 2))
CROSSOVER_PAIRS = ("rtx-pro-6000:kimi-k2.5-class", "h100:llama3.1-8b", "h200:llama3.1-8b",
                   "h200:llama3.3-70b")
EAGLE3 = spec_argv({"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                    "speculative_num_draft_tokens": 4})


@dataclass(frozen=True)
class Row:
    """One published figure."""

    source: str
    """Where it is published (URL)."""
    hardware: str
    """Simulator hardware profile."""
    model: str
    """Simulator model profile."""
    tp: int
    """Tensor-parallel GPUs."""
    batch: int
    """Requests decoded together."""
    shape: tuple[int, int, int] | None
    """EAGLE-3 (steps, topk, draft tokens); None for the server without speculation."""
    accept: float
    """Published acceptance length (tokens per verify, the bonus token included)."""
    tok_s: float
    """Published output tok/s."""


ROWS = (
    Row(PR_4716, "h100", "llama3.3-70b", 8, 1, None, 1.0, 88.61),
    Row(PR_4716, "h100", "llama3.3-70b", 8, 1, (8, 8, 64), 5.88, 234.54),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 1, None, 1.0, 222.47),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 1, (3, 1, 4), 1.86, 159.78),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 1, (3, 3, 8), 2.20, 172.99),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 4, None, 1.0, 566.21),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 4, (3, 1, 4), 1.86, 447.90),
    Row(SPECFORGE_339, "h100", "qwen3-30b-a3b", 2, 4, (3, 3, 8), 2.27, 426.46),
    Row(ANGELSLIM_163, "h100", "qwen3-30b-a3b", 4, 8, None, 1.0, 677.14),
    Row(ANGELSLIM_163, "h100", "qwen3-30b-a3b", 4, 8, (4, 4, 16), 2.578, 673.14),
    Row(ANGELSLIM_163, "h100", "qwen3-30b-a3b", 4, 32, None, 1.0, 1128.30),
    Row(ANGELSLIM_163, "h100", "qwen3-30b-a3b", 4, 32, (4, 4, 16), 2.560, 927.11),
)


def simulate(row: Row, reps: int, tree_kernel_us: float | None = None) -> float:
    """Modelled output tok/s of one row, its acceptance forced (``tree_kernel_us``: in place of
    the profile's, 0 to leave the tree's extra kernels out)."""
    argv = ["--sim-hardware", row.hardware, "--sim-model", row.model, "--tp-size",
            str(row.tp), "--max-running-requests", str(row.batch)]
    case = {"prompt_tokens": 128, "output_tokens": 512, "domain": "general",
            "requests": row.batch, "concurrent": True, "argv": argv}
    if row.shape is not None:
        steps, topk, tokens = row.shape
        case["argv"] = [*argv, *spec_argv({"speculative_num_steps": steps,
                                           "speculative_eagle_topk": topk,
                                           "speculative_num_draft_tokens": tokens})]
        case["env"] = {"SGLANG_SIMULATE_ACC_LEN": repr(row.accept)}
    profile = load_profile("default", row.hardware, row.model)
    if tree_kernel_us is not None:
        profile = with_efficiency(profile, tree_kernel_us=tree_kernel_us)
    return measure(profile, case, reps)


def trees(reps: int, tree_kernel_us: float | None) -> None:
    """Trees of 3 steps against the chain of 3 on 8 H200, Llama-3.3-70B, batch 8: the chain's
    acceptance forced at 3.0, the tree's at 1.0, 1.1 and 1.2 times it (no published figure)."""
    def tok_s(shape: tuple[int, int, int], accept: float) -> float:
        return simulate(Row("", "h200", "llama3.3-70b", 8, 8, shape, accept, 0.0), reps,
                        tree_kernel_us)

    chain = tok_s((3, 1, 4), 3.0)
    print("| tree / chain of 3 steps | tree accepts as the chain | +10 % | +20 % |")
    print("|---|---|---|---|")
    for topk in (3, 4):
        ratios = [tok_s((3, topk, 8), 3.0 * f) / chain for f in (1.0, 1.1, 1.2)]
        print(f"| topk {topk}, 8 draft tokens | " + " | ".join(f"{r:.2f}x" for r in ratios)
              + " |")


def step_parts() -> None:
    print("| hardware | model | TP | k = 0 over decode, batch 1 | batch 8 | batch 64 |")
    print("|---|---|---|---|---|---|")
    for hw, model, tp in GRID_PAIRS:
        rl = load_profile("default", hw, model).roofline(tp, {}, {})[0]
        cells = [f"{rl.spec_step_s(b, 0, 1, b * 1024.0) / rl.decode_s(b, b * 1024.0) - 1:+.1%}"
                 for b in (1, 8, 64)]
        print(f"| {hw} | {model} | {tp} | " + " | ".join(cells) + " |")
    rl = load_profile("default", "h100", "llama3.1-8b").roofline(1, {}, {})[0]
    decode = rl.decode_s(1, CONTEXT)
    print(f"\n{VLLM_20780}: step / plain decode at batch 1 (SIMULATION decode "
          f"{decode * 1e3:.2f} ms, published {VLLM_DECODE_TPOT_MS} ms)")
    print("| K | published step ms | published / decode | SIMULATION / decode | error |")
    print("|---|---|---|---|---|")
    for k, (accept, tpot) in VLLM_EAGLE3.items():
        pub = accept * tpot / VLLM_DECODE_TPOT_MS
        sim = rl.spec_step_s(1, k, k + 1, CONTEXT) / decode
        print(f"| {k} | {accept * tpot:.2f} | {pub:.3f} | {sim:.3f} | {sim / pub - 1:+.1%} |")


def crossover(pairs: Sequence[str], loads: Sequence[int], reps: int) -> None:
    print("| hardware | model | " + " | ".join(f"c={c}" for c in loads)
          + " | EAGLE-3 stops paying |")
    print("|---|---|" + "---|" * (len(loads) + 1))
    for pair in pairs:
        hw, model = pair.split(":")
        tp = ["--tp-size", "8"] if model == "llama3.3-70b" else []
        prof = load_profile("default", hw, model)
        ratios = []
        for c in loads:
            base = ["--sim-hardware", hw, "--sim-model", model, *tp,
                    "--max-running-requests", str(c)]
            case = {"prompt_tokens": 128, "output_tokens": 256, "domain": "coding",
                    "requests": 2 * c, "concurrent": True}
            b = measure(prof, {**case, "argv": base}, reps)
            ratios.append(measure(prof, {**case, "argv": [*base, *EAGLE3]}, reps) / b)
        stop = next((c for c, r in zip(loads, ratios, strict=True) if r < 1.0), None)
        print(f"| {hw} | {model} | " + " | ".join(f"{r:.2f}x" for r in ratios)
              + f" | {'c=' + str(stop) if stop else 'not within ' + str(loads[-1])} |")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/sim_forced_published.py")
    ap.add_argument("--reps", type=int, default=2, help="simulator seeds per cell")
    ap.add_argument("--tree-kernel-us", type=float, default=None,
                    help="in place of the profile's tree_kernel_us (0: no tree term)")
    ap.add_argument("--trees", action="store_true",
                    help="H200 Llama-3.3-70B trees against the chain instead of the table")
    ap.add_argument("--step-parts", action="store_true",
                    help="the step-cost function at k = 0 and vLLM's chains instead")
    ap.add_argument("--crossover", action="store_true",
                    help="where EAGLE-3 stops paying on each --pairs instead")
    ap.add_argument("--pairs", nargs="+", default=list(CROSSOVER_PAIRS), help="hardware:model")
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 48, 64])
    ns = ap.parse_args(argv)
    if ns.reps < 1 or (ns.tree_kernel_us is not None and ns.tree_kernel_us < 0):
        ap.error("--reps must be >= 1 and --tree-kernel-us >= 0")
    if ns.trees:
        trees(ns.reps, ns.tree_kernel_us)
        return 0
    if ns.step_parts:
        step_parts()
        return 0
    if ns.crossover:
        crossover(ns.pairs, ns.concurrency, ns.reps)
        return 0
    print("| source | hardware, model, TP | batch | shape | accept length | published tok/s"
          " | SIMULATION tok/s | error | published / baseline | SIMULATION / baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base: dict[tuple[str, str, int, int], tuple[float, float]] = {}
    steps: dict[Row, tuple[float, float]] = {}
    for row in ROWS:
        got = simulate(row, ns.reps, ns.tree_kernel_us)
        # a step's duration as the tok/s give it: batch x accept length / tok/s
        steps[row] = (row.batch * row.accept / row.tok_s, row.batch * row.accept / got)
        key = (row.source, row.model, row.tp, row.batch)
        if row.shape is None:
            base[key] = (row.tok_s, got)
        pub0, sim0 = base.get(key, (float("nan"), float("nan")))
        shape = "/".join(map(str, row.shape)) if row.shape else "no speculation"
        print(f"| {row.source.rsplit('/', 3)[-3]} #{row.source.rsplit('/', 1)[-1]} | "
              f"{row.hardware}, {row.model}, {row.tp} | {row.batch} | {shape} | "
              f"{row.accept:g} | {row.tok_s:g} | {got:.1f} | {got / row.tok_s - 1:+.1%} | "
              f"{row.tok_s / pub0:.2f}x | {got / sim0:.2f}x |")
    tree_vs_chain(steps)
    return 0


def tree_vs_chain(steps: dict[Row, tuple[float, float]]) -> None:
    """A tree's step against the chain's of the same depth, where a source has both at one
    batch: (batch x accept length / tok/s) of each, published and SIMULATION."""
    print("\n| source | batch | tree / chain | published step ratio | SIMULATION | error |")
    print("|---|---|---|---|---|---|")
    for tree, (pub_t, sim_t) in steps.items():
        if tree.shape is None or tree.shape[1] == 1:
            continue
        for chain, (pub_c, sim_c) in steps.items():
            if (chain.shape is not None and chain.shape[1] == 1
                    and chain.shape[0] == tree.shape[0] and chain.batch == tree.batch
                    and (chain.source, chain.model, chain.tp) ==
                    (tree.source, tree.model, tree.tp)):
                pub, sim = pub_t / pub_c, sim_t / sim_c
                print(f"| {tree.source.rsplit('/', 3)[-3]} #{tree.source.rsplit('/', 1)[-1]} | "
                      f"{tree.batch} | {'/'.join(map(str, tree.shape))} / "
                      f"{'/'.join(map(str, chain.shape))} | {pub:.3f} | {sim:.3f} | "
                      f"{sim / pub - 1:+.1%} |")


if __name__ == "__main__":
    raise SystemExit(main())
