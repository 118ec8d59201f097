"""Where EAGLE-3 stops paying in the simulator: modelled throughput of baseline vs EAGLE-3 by
concurrency, for each shipped hardware + model pair (offline, the same engine and scheduler the
server runs, no clock; SIMULATION numbers).

Each cell: ``--max-running-requests C`` on both servers, 2 x C requests of 128 prompt tokens
and 256 output tokens (ignore_eos, temperature 0) sent at once; tok/s = output tokens /
modelled seconds. EAGLE-3 runs 3 steps, topk 1, 4 draft tokens.

    .venv/bin/python bench/sim_crossover.py
    .venv/bin/python bench/sim_crossover.py --pairs h100:llama3.1-8b --concurrency 1 8 64
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from engines.sim.calibrate import measure
from engines.sim.profile import load_profile

EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
PAIRS = ("rtx-pro-6000:kimi-k2.5-class", "h100:llama3.1-8b", "h200:llama3.1-8b",
         "h200:llama3.3-70b")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/sim_crossover.py")
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), help="hardware:model")
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 48, 64])
    ap.add_argument("--domain", default="coding", choices=("coding", "general"))
    ap.add_argument("--reps", type=int, default=2)
    ns = ap.parse_args(argv)
    print("| hardware | model | " + " | ".join(f"c={c}" for c in ns.concurrency)
          + " | EAGLE-3 stops paying |")
    print("|---|---|" + "---|" * (len(ns.concurrency) + 1))
    for pair in ns.pairs:
        hw, model = pair.split(":")
        tp = ["--tp-size", "8"] if model == "llama3.3-70b" else []
        prof = load_profile("default", hw, model)
        ratios = []
        for c in ns.concurrency:
            base = ["--sim-hardware", hw, "--sim-model", model, *tp,
                    "--max-running-requests", str(c)]
            case = {"prompt_tokens": 128, "output_tokens": 256, "domain": ns.domain,
                    "requests": 2 * c, "concurrent": True}
            b = measure(prof, {**case, "argv": base}, ns.reps)
            e = measure(prof, {**case, "argv": [*base, *EAGLE3]}, ns.reps)
            ratios.append(e / b)
        stop = next((c for c, r in zip(ns.concurrency, ratios, strict=True) if r < 1.0), None)
        print(f"| {hw} | {model} | " + " | ".join(f"{r:.2f}x" for r in ratios)
              + f" | {'c=' + str(stop) if stop else 'not within ' + str(ns.concurrency[-1])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
