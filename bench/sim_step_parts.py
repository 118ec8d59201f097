"""The speculative step from its parts against published figures (SIMULATION, the step-cost
function alone, no clock): docs/simulator.md "The speculative step from its parts".

1. k = 0 (SGLang's zero-step path) over a plain decode step on every grid pair, at batch 1, 8
   and 64 with 1,024 cached tokens per request: users report 4-11 %.
2. Chains of K = 2..7 draft steps at batch 1 on one H100, Llama-3.1-8B-Instruct, against
   vllm-project/vllm #20780 (EAGLE-3, MT-bench, vLLM, batch 1): the published step is TPOT x
   accept length, over a plain decode's TPOT of 7.07 ms.

    .venv/bin/python bench/sim_step_parts.py
"""

from __future__ import annotations

from engines.sim.profile import load_profile

PAIRS = [(hw, model, tp) for hw in ("rtx-pro-6000", "h100", "h200")
         for model, tp in (("kimi-k2.5-class", 8), ("llama3.1-8b", 1), ("llama3.3-70b", 8))]
PAIRS.append(("h100", "qwen3-30b-a3b", 2))

VLLM_20780 = "https://github.com/vllm-project/vllm/issues/20780"
VLLM_DECODE_TPOT_MS = 7.07
VLLM_EAGLE3 = {2: (2.36, 4.32), 3: (2.79, 4.09), 4: (3.08, 4.05), 5: (3.32, 4.13),
               6: (3.46, 4.20), 7: (3.54, 4.29)}
"""K: (accept length, TPOT ms), EAGLE-3 at batch 1."""
CONTEXT = 512
"""Cached tokens of the batch-1 request (an MT-bench prompt and part of its answer; assumed)."""


def zero_step() -> None:
    print("| hardware | model | TP | k = 0 over decode, batch 1 | batch 8 | batch 64 |")
    print("|---|---|---|---|---|---|")
    for hw, model, tp in PAIRS:
        rl = load_profile("default", hw, model).roofline(tp, {}, {})[0]
        cells = []
        for batch in (1, 8, 64):
            kv = batch * 1024.0
            cells.append(f"{rl.spec_step_s(batch, 0, 1, kv) / rl.decode_s(batch, kv) - 1:+.1%}")
        print(f"| {hw} | {model} | {tp} | " + " | ".join(cells) + " |")


def chains() -> None:
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


if __name__ == "__main__":
    zero_step()
    chains()
