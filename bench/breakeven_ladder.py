"""The break-even acceptance from real cells, nothing forced (vLLM cannot force acceptance on the
CPU): real vLLM 0.32.0 on this machine's CPU serves the project's trained target, baseline and
with each rung of the draft-model ladder (`+sweep=cpu_breakeven`: the target with noise 0, 0.1,
0.2, 0.35, 0.6 on every weight, 4 drafts per step, c = 1, 2, 4, each cell twice). Then, each
step as a user runs it:

1. the run's report: per load, the break-even accept length interpolated between the rungs'
   measured lengths with its 95 % interval, and each rung's verdict by the curve fitted
   without it (out of sample) beside the sign of its measured speedup;
2. `python -m grid.twin RUN --known-acceptance --holdout 2`: the simulator's step costs fitted
   from the rungs' counted acceptance (c = 1 and 4), c = 2 predicted, against the spread of the
   same cells measured twice;
3. the simulator on that twin at forced lengths 1.5 ... 5 (the same loads, prompts and output
   length): its own break-even curve, set beside the real one.

Numbers: steps 1 and 2's measured figures are real engine, CPU, tiny trained models; the twin's
predictions and step 3 are SIMULATION (twin of the run).

    python bench/breakeven_ladder.py --out /tmp/ladder            # run both grids, print
    python bench/breakeven_ladder.py --out /tmp/ladder --reuse    # print again
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _common import ENGINES_PYTHON, run_grid, run_twin

RUN_ID, SIM_ID = "cpu_breakeven", "sim_forced"
LENGTHS = (1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
"""Forced lengths of the simulator's curve: the rungs' range (1.2 to 5.0) in half steps."""


def curves(run_dir: Path) -> dict[float, dict[str, Any]]:
    """load -> the run's break-even curve (decision.json `breakeven.curves`; one
    configuration per run here)."""
    decision = json.loads((run_dir / "decision.json").read_text())
    return {float(c["load"]): c for c in (decision.get("breakeven") or {}).get("curves", [])}


def describe(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    lo, hi = c["interval"]
    ends = {"below": "<=", "above": ">="}.get(c["where"], "")
    return f"{ends}{c['break_even_length']:.2f} [{lo:.2f}, {hi:.2f}]"


def twin(run_dir: Path) -> dict[str, Any]:
    # --saturated: on 2 cores the load generator shares the cores with the engine and flags
    # most cells of a model this small; the twin then models the server as this client sees it
    run_twin(run_dir, ["--known-acceptance", "--saturated", "--holdout", "2"],
             run_dir.parent / "twin.log")
    return json.loads((run_dir / "twin.json").read_text())["twin"]


def simulate(out: Path, run_dir: Path) -> Path:
    lengths = ",".join(str(a) for a in LENGTHS)
    forced = "[" + ",".join(str(a) for a in LENGTHS) + "]"
    wall, sim_dir, _ = run_grid([
        "engine=sim", f"engine.options.profile={run_dir / 'twin.json'}", "hardware=cpu",
        "model=tiny_trained", "model.drafter.train_data=null",
        "+model.drafter.train_mix={coding:1,agentic:1,math:1,chat:1,encyclopedic:1}",
        "workload=agentic", "workload.endpoint=chat", "workload.max_new_tokens=64",
        "workload.input_tokens=[1,100]", "load.requests_per_stream=24", "load.min_requests=48",
        "variant=baseline,tiny_trained_draft", f"variant.forced_acceptance.length=null,{lengths}",
        "load.concurrency=1,2,4",
        f"grid.exclude=[{{variant:baseline,variant.forced_acceptance.length:{forced}}},"
        "{variant:tiny_trained_draft,variant.forced_acceptance.length:null}]"], out, SIM_ID)
    print(f"simulator at forced lengths: {wall:.0f} s (log {out}/{SIM_ID}.log)")
    return sim_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reuse", action="store_true", help="read the runs --out already holds")
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    run_dir, sim_dir = ns.out / RUN_ID, ns.out / SIM_ID
    if not ns.reuse:
        wall, run_dir, _ = run_grid(["+sweep=cpu_breakeven", f"engine.python={ENGINES_PYTHON}",
                                     "load.requests_per_stream=24", "load.min_requests=48"],
                                    ns.out, RUN_ID)
        print(f"+sweep=cpu_breakeven: {wall:.0f} s (log {ns.out}/{RUN_ID}.log)")
    real = curves(run_dir)
    print("\nthe ladder (real engine, CPU, tiny trained models): accept length, throughput over "
          "the baseline's [95 %], verdict by the curve fitted without the rung")
    agree = decided = 0
    for load, c in sorted(real.items()):
        print(f"  c={load:g}: break-even {describe(c)}")
        for r in c.get("rungs", []):
            lo, hi = r["ratio_interval"]
            decided += r["held_out_agrees"] is not None
            agree += bool(r["held_out_agrees"])
            sign = {True: "agrees", False: "DISAGREES", None: "-"}[r["held_out_agrees"]]
            print(f"    {r['variant'].rsplit('__', 1)[-1]:<18}{r['accept_length']:6.2f}  "
                  f"x{r['ratio']:.2f} [{lo:.2f}, {hi:.2f}]  {r['held_out_verdict']:<20}{sign}")
    print(f"  held out: verdict agrees with the measured speedup's sign at {agree} of {decided} "
          "rungs with a sign and a verdict")
    fitted = twin(run_dir)
    split = fitted["holdout_split"]["metrics"]
    spread, goal = fitted["repeat_spread"], fitted["goal"]
    print(f"\ntwin of known acceptance ({fitted['known_acceptance']} speculative cells), "
          "fitted on c=1,4, c=2 predicted (SIMULATION):")
    for metric in ("output_tok_s", "tpot_p50_s", "speedup"):
        if metric in split:
            m = split[metric]
            print(f"  {metric:<13} mean |error| {m['mae_pct']:5.1f} % [{m['lo']:.1f}, "
                  f"{m['hi']:.1f}], largest {m['max_pct']:.1f} %")
    for metric, s in spread.items():
        print(f"  repeat spread {metric:<13} mean {s['mean_pct']:.1f} %, largest "
              f"{s['max_pct']:.1f} % ({s['n']} cells)")
    if goal:
        print(f"  goal: {goal['error_pct']:.1f} % <= max(10 %, {goal['spread_pct']:.1f} %): "
              + ("met" if goal["met"] else "NOT met"))
    if not ns.reuse:
        sim_dir = simulate(ns.out, run_dir)
    sim = curves(sim_dir)
    print("\nbreak-even accept length per load: real ladder vs the simulator at forced lengths")
    print(f"  {'load':<6}{'real (ladder)':>24}{'SIMULATION (twin, forced)':>30}")
    for load in sorted(set(real) | set(sim)):
        print(f"  c={load:<4g}{describe(real.get(load)):>24}{describe(sim.get(load)):>30}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
