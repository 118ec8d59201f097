"""The twin's goal, on the simulator's closed-form model (SIMULATION numbers, no servers): a
twin fitted to 8 cells of the h200 / llama3.1-8b profile (baseline and EAGLE-3 3/1/4 at
--loads, 128-token coding prompts, 256 output tokens, --max-running-requests 256, 4 requests
per stream, --noise lognormal measurement error, SGLang's counters: mean accept length only),
starting from the default profile's factors, predicts that profile's dense grid (1..256 in
steps of sqrt 2) within +-10 % and its crossover in the same dense interval. Also prints what
the twin said its own error would be (leave one load out) beside the error it has.

    .venv/bin/python bench/twin_goal.py
    .venv/bin/python bench/twin_goal.py --seeds 0 1 2 --positions   # vLLM-like counters
    .venv/bin/python bench/twin_goal.py --discrete 1 16 128          # + the discrete simulator
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import engines
from engines.sim.calibrate import closed_loop, spec_argv
from engines.sim.profile import load_profile
from engines.sim.twin import synthetic
from engines.sim.twin.analytic import Scenario, Setup, predict
from engines.sim.twin.node import profile_of
from grid.analysis.search import lattice
from specgrid_metrics.crossover import crossover_of

EAGLE3_FLAGS = spec_argv({"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                          "speculative_num_draft_tokens": 4})


def scenario(c: int, spec: tuple[int, int, int] | None) -> Scenario:
    return Scenario(c, 128.0, 256.0, spec, max_running=256, domains=(("coding", 1.0),),
                    requests_per_stream=4.0)


def speedups(setup: Setup, loads: Sequence[int]) -> list[tuple[int, float]]:
    return [(c, predict(setup, scenario(c, synthetic.EAGLE3)).output_tok_s
             / predict(setup, scenario(c, None)).output_tok_s) for c in loads]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/twin_goal.py")
    ap.add_argument("--loads", nargs="+", type=int, default=[1, 8, 64, 256])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--positions", action="store_true", help="cells count accepted drafts "
                    "per position (vLLM's counters)")
    ap.add_argument("--discrete", nargs="*", type=int, default=[],
                    help="loads to serve on the discrete simulator too (truth vs twin)")
    ns = ap.parse_args(argv)
    truth_profile = load_profile("default", "h200", "llama3.1-8b")
    truth = Setup.from_profile(truth_profile)
    dense = list(lattice(1, 256, math.sqrt(2)))
    for seed in ns.seeds:
        t0 = time.perf_counter()
        cells = synthetic.cells(truth, ns.loads, noise=ns.noise, seed=seed,
                                per_position=ns.positions)
        doc = engines.twin_modeller().fit_twin(cells, run_id=f"goal-seed{seed}", hardware="h200",
                                          model="llama3.1-8b", start="default", seed=seed,
                                          replicates=ns.replicates)
        fit_s = time.perf_counter() - t0
        twin_profile = profile_of(doc)
        twin = Setup.from_profile(twin_profile)
        print(f"\nseed {seed}: {len(cells)} cells at c={ns.loads}, noise {ns.noise:.0%}, "
              f"fit + {ns.replicates} replicates + holdout in {fit_s:.1f} s")
        print("| c | baseline truth | twin | error | EAGLE-3 truth | twin | error | speedup "
              "truth | twin | error |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        worst = 0.0
        for c in dense:
            row = [str(c)]
            for spec in (None, synthetic.EAGLE3):
                t = predict(truth, scenario(c, spec)).output_tok_s
                p = predict(twin, scenario(c, spec)).output_tok_s
                worst = max(worst, abs(p / t - 1))
                row += [f"{t:.0f}", f"{p:.0f}", f"{100 * (p / t - 1):+.1f} %"]
            ts, ps = speedups(truth, [c])[0][1], speedups(twin, [c])[0][1]
            worst = max(worst, abs(ps / ts - 1))
            row += [f"{ts:.3f}", f"{ps:.3f}", f"{100 * (ps / ts - 1):+.1f} %"]
            print("| " + " | ".join(row) + " |")
        cross_t, cross_p = (crossover_of(dense, [s - 1.0 for _, s in speedups(setup, dense)])
                            for setup in (truth, twin))
        print(f"largest error over the dense grid (tok/s and speedup): {100 * worst:.1f} %; "
              f"crossover: truth c={cross_t:.1f}, twin c={cross_p:.1f}")
        stated = doc["twin"]["holdout"]["metrics"]
        print("the twin's own leave-one-load-out error: " + ", ".join(
            f"{m} {s['mae_pct']:.1f} % [{s['lo']:.1f}, {s['hi']:.1f}] (max {s['max_pct']:.1f})"
            for m, s in stated.items()))
        for name, f in doc["twin"]["factors"].items():
            print(f"  {name}: {f['value']:.4g} [{f['lo']:.4g}, {f['hi']:.4g}]")
        for c in ns.discrete:  # the discrete simulator serving the truth and the twin
            for spec, flags in ((None, []), (synthetic.EAGLE3, EAGLE3_FLAGS)):
                cap = ["--max-running-requests", "256", "--sim-hardware", "h200",
                       "--sim-model", "llama3.1-8b"]
                a = closed_loop(truth_profile, [*flags, *cap], c, 128, 256, 4).output_tok_s
                b = closed_loop(twin_profile, [*flags, *cap], c, 128, 256, 4).output_tok_s
                print(f"discrete simulator c={c} {'EAGLE-3' if spec else 'baseline'}: truth "
                      f"{a:.0f}, twin {b:.0f} tok/s ({100 * (b / a - 1):+.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
