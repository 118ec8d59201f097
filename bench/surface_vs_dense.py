"""One surface, every drafter, out of sample on the simulator (SIMULATION numbers).

1. Each drafter profiled at one low load: EAGLE-3 unforced at depth 7, c=1, its own seed; the
   profile from its requests' acceptance histograms (grid/analysis/surface/profile.py
   `profile_from_requests`), written as a profile file. Drafters: the simulator's EAGLE-3 on
   coding prompts, the same on encyclopedic prompts, and a drafter whose acceptance barely
   decays over positions (engines/sim/profiles/model/kimi-k2.5-class-flat.json: the same node
   and step costs) on coding prompts.
2. The surface search (`+sweep=speculation grid.search.forced=true`, grid.search.profile = the
   coding profile) over c = 1..64 x k = 1..7, forced acceptance.
3. Held out, per drafter: the dense real-acceptance grid, the baseline and EAGLE-3 unforced at
   every k = 1..7 and c = 1, 2, 4, ..., 64 (its own server per depth).
4. Compared: the predicted speedup AL(k) / c(B, k) (the surface interpolated where it measured
   no cell) against the measured one, "within" = inside max(5 %, the measured cell's 95 %
   interval); the best depth per load, "agrees" = the dense grid's best, or a depth whose
   measured speedup lies inside the best's interval.

    python bench/surface_vs_dense.py --results /tmp/sf-bench                   # runs everything
    python bench/surface_vs_dense.py --results /tmp/sf-bench --phases surface  # the surface again
    python bench/surface_vs_dense.py --results /tmp/sf-bench --phases none     # compares only

5. The recommendation against the dense grid (`--phases question,dense128`): the speculation
   question itself (`+sweep=speculation` over c = 1..128 in sqrt(2) steps, the run's own
   drafter, confirmation included) against the dense grid of the baseline and k = 1..7
   unforced over the same lattice (14 loads: 112 cells): its cells and starts against the
   dense grid's; at every load its recommended depth against the dense best (or a depth
   inside the best's interval); its threshold against the dense crossover's interval at the
   configured depth.

    python bench/surface_vs_dense.py --results /tmp/q-bench --phases question,dense128
    python bench/surface_vs_dense.py --results /tmp/q-h200 --phases question,dense128 \
        --node h200/llama3.1-8b                              # another node, the same comparison

6. A wrong surface caught (`--phases wrong`): the simulator's drafting step made 15 % costlier
   for the drafter's own (unforced) cells only (`engine.options.unforced_spec_cost_scale=1.15`,
   `--unforced-scale`), so a surface from forced cells predicts the drafter too fast; the
   question with `grid.search.forced=true` (as in 5) against the dense grid of 5 with the same
   option: whether its confirming cells flag the disagreement, and its recommendation against
   the dense grid's as in 5.

    python bench/surface_vs_dense.py --results /tmp/q-bench --phases wrong
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
from _common import run_grid

from grid.analysis import Slo
from grid.analysis.bootstrap import interval
from grid.analysis.surface import (
    best_depths,
    interpolated,
    predict,
    profile_from_requests,
    profile_text,
    read_profile,
)
from grid.questions.speculation.read import PROFILE_COLUMNS, read_run
from grid.report.data import load_run
from grid.store.loader import load_cells, load_requests

LOADS = (1, 2, 4, 8, 16, 32, 64)
LATTICE = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128)
"""c = 1..128 in sqrt(2) steps (grid/analysis/search.py `lattice`)."""
DEPTHS = (1, 2, 3, 4, 5, 6, 7)
DRAFTERS = {  # name -> the overrides that make it
    "coding": ["workload=coding"],
    "encyclopedic": ["workload=encyclopedic"],
    "flat": ["workload=coding", "engine.options.model=kimi-k2.5-class-flat"],
}
TOLERANCE = 0.05


def grid_run(args: argparse.Namespace, overrides: list[str], run_id: str) -> float:
    """One `python -m grid.run` with the bench's settings into `--results/run_id` (its output
    in `run_id.log` there); its wall seconds."""
    print(f"grid.run {' '.join(overrides)} -> {args.results / run_id}", flush=True)
    node = [f"engine.options.{k}={v}" for k, v in zip(("hardware", "model"),
                                                      args.node.split("/"), strict=True)
            ] if args.node else []
    wall, _, _ = run_grid([*overrides, *node, f"engine.options.time_scale={args.time_scale}",
                           f"workload.max_new_tokens={args.max_new_tokens}",
                           f"load.requests_per_stream={args.requests_per_stream}"],
                          args.results, run_id)
    return wall


def profile_run(args: argparse.Namespace, name: str) -> float:
    seconds = grid_run(args, ["variant=eagle3", "variant.args.speculative_num_steps=7",
                              "load.concurrency=1", "load.num_requests=16",
                              "engine.options.seed=1", *DRAFTERS[name]], f"profile-{name}")
    run = args.results / f"profile-{name}"
    requests = load_requests(run, columns=PROFILE_COLUMNS)
    profile = profile_from_requests(requests, "domain", load_cells(run), source=str(run))
    (args.results / f"profile-{name}.json").write_text(profile_text(profile))
    return seconds


def dense_run(args: argparse.Namespace, name: str) -> float:
    steps = ",".join(map(str, DEPTHS))
    return grid_run(args, ["variant=baseline,eagle3",
                           f"variant.args.speculative_num_steps={steps}",
                           "load.concurrency=" + ",".join(map(str, LOADS)),
                           "grid.exclude=[{variant:baseline,variant.args.speculative_num_steps:["
                           + ",".join(map(str, DEPTHS[1:])) + "]}]", *DRAFTERS[name]],
                    f"dense-{name}")


def dense128_run(args: argparse.Namespace, extra: tuple[str, ...] = (), run_id: str = "dense128"
                 ) -> float:
    steps = ",".join(map(str, DEPTHS))
    return grid_run(args, ["variant=baseline,eagle3", "workload=coding",
                           f"variant.args.speculative_num_steps={steps}",
                           "load.concurrency=" + ",".join(map(str, LATTICE)),
                           "grid.exclude=[{variant:baseline,variant.args.speculative_num_steps:["
                           + ",".join(map(str, DEPTHS[1:])) + "]}]", *extra], run_id)


def question_run(args: argparse.Namespace, extra: tuple[str, ...] = (), run_id: str = "question"
                 ) -> float:
    return grid_run(args, ["+sweep=speculation", "grid.search.concurrency=[1,128]",
                           "grid.search.resolution=1.4142135623730951",
                           f"grid.search.max_cells={args.question_cells}",
                           f"grid.search.confirm_cells={args.confirm_cells}", *extra], run_id)


def wrong_runs(args: argparse.Namespace) -> dict[str, float]:
    """Item 6: the forced question and the dense grid, the drafter's own steps made costlier."""
    scale = f"engine.options.unforced_spec_cost_scale={args.unforced_scale}"
    return {"wrong-question": question_run(args, ("grid.search.forced=true", scale),
                                           "wrong-question"),
            "wrong-dense128": dense128_run(args, (scale,), "wrong-dense128")}


def surface_run(args: argparse.Namespace) -> float:
    return grid_run(args, ["+sweep=speculation", "grid.search.forced=true",
                           f"grid.search.max_cells={args.max_cells}",
                           f"grid.search.profile={args.results / 'profile-coding.json'}"],
                    "surface")


def starts(run: Path) -> int:
    with sqlite3.connect(run / "_ledger.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM servers").fetchone()[0])


def measured_speedups(run: Path, with_reps: bool = False) -> dict:
    """(load, depth) -> the dense grid's speedup over the baseline at that load, 95 % (and its
    replicates, with `with_reps`)."""
    data = load_run(run)
    table = data.stats.table
    value: dict[tuple[int, int], tuple[float, np.ndarray]] = {}
    for cell_id, variant, load, tput in zip(table.cell_id, table.variant, table.concurrency,
                                            table.output_tok_s, strict=True):
        depth = 0 if str(variant).startswith("baseline") else int(str(variant).rsplit("-", 1)[1])
        value[(int(load), depth)] = (float(tput), data.stats.replicates[cell_id]["output_tok_s"])
    out = {}
    for (b, k), (t, reps) in value.items():
        base, base_reps = value[(b, 0)]
        if k:
            lo, hi = interval(reps / base_reps)
            out[(b, k)] = (t / base, lo, hi, reps / base_reps) if with_reps else (t / base, lo,
                                                                                   hi)
    return out


def depth_at(tiers: list, load: int) -> int:
    return [d for start, d in tiers if start <= load][-1]


def compare_question(args: argparse.Namespace, question: str = "question",
                     dense_run: str = "dense128") -> None:
    """The question's recommendation against the dense grid of c = 1..128 (items 5, 6 above)."""
    import pandas as pd

    from grid.analysis.decision import crossovers

    trace = json.loads((args.results / question / "search.json").read_text())
    res, depth = trace["result"], int(trace["depth"])
    rec = res["recommendation"]
    meas = measured_speedups(args.results / dense_run, with_reps=True)
    dense = len(LATTICE) * (1 + len(DEPTHS))
    cells = res["cells"] + res["confirmation"]["cells"]
    used, dense_starts = starts(args.results / question), starts(args.results / dense_run)
    conf = res["confirmation"]
    (dom, *_) = res["prediction"]["domains"].values()
    pred = {(c["load"], c["depth"]): c for c in dom["cells"]}
    print(f"\n{question} (forced {trace.get('forced')}): the confirmation flagged "
          + (", ".join(f"c={b} k={k}" for b, k in conf["disagree"]) or "nothing"))
    asked = {(b, k) for s in trace["steps"] if s.get("phase") == "confirm" for b, k, _ in
             s["points"]}
    for o in (o for o in conf["own"] if (o["load"], o["depth"]) in asked):
        p = pred.get((o["load"], o["depth"]), {})
        print(f"  own c={o['load']} k={o['depth']}: {o['speedup']:.3f} {o['interval']}, "
              f"predicted {p.get('speedup')} {p.get('interval')}"
              + (f" (the fit alone {p['fit_interval']})" if "fit_interval" in p else ""))
    print(f"{question}: {cells} cells ({res['cells']} surface + {res['confirmation']['cells']} "
          f"confirming) = {cells / dense:.0%} of the dense grid's {dense}; {used} server starts "
          f"against the dense grid's {dense_starts}; stop {res['stop']}")
    print(f"  recommendation ({rec['status']}): {rec['text']}")
    base = {}
    for run in (question, dense_run):
        table = load_run(args.results / run).stats.table
        rows = table[table.variant.astype(str).str.startswith("baseline")]
        base[run] = dict(zip(rows.concurrency.astype(int), rows.output_tok_s, strict=True))
    ratio = {b: base[question][b] / base[dense_run][b] for b in base[question]
             if b in base[dense_run]}
    worst = max(ratio.values(), key=lambda r: abs(np.log(r))) if ratio else 1.0
    print("  the baseline in both runs (the same cell measured twice), question / dense: "
          + ", ".join(f"c={b} {r:.2f}" for b, r in sorted(ratio.items()))
          + (f" -- {worst:.2f}: the runs differ by more than the answers compared"
             if abs(worst - 1.0) > 0.15 else ""))
    agree = 0
    for b in LATTICE:
        options = {0: (1.0, 1.0, 1.0), **{k: meas[(b, k)][:3] for k in DEPTHS}}
        best = max(options, key=lambda k: (options[k][0], -k))
        chosen = depth_at(rec["schedule"], b)
        _, lo, hi = options[best]
        ok = chosen == best or lo <= options[chosen][0] <= hi
        agree += ok
        print(f"  c={b}: recommended {chosen}, dense best {best} "
              f"{options[best][0]:.3f} [{lo:.3f}, {hi:.3f}]{'' if ok else '  NO'}")
    rows = [{"variant": "eagle3", "workload": "coding", "load_kind": "concurrency",
             "load": float(b), "speedup": meas[(b, depth)][0] - 1.0,
             "_reps": meas[(b, depth)][3] - 1.0} for b in LATTICE]
    (cross,) = crossovers(pd.DataFrame(rows))
    threshold = rec["threshold"].get("speculative_disable_above_batch")
    if threshold is None:  # no spread between repeats stated: what the within-run intervals set
        threshold = rec["threshold"].get("within_run")
    off = threshold in (None, 0) and not any(k for _, k in rec["schedule"])
    if threshold is None and off:  # no threshold: the baseline at every load
        threshold = "none (the baseline at every load)"
    inside = (off and cross.point == -np.inf) or (
        isinstance(threshold, int) and cross.lo <= max(threshold, 1) <= cross.hi)
    print(f"  best depth agrees at {agree} of {len(LATTICE)} loads; threshold {threshold} "
          f"(depth {depth}) against the dense {cross.describe()}: "
          f"{'inside' if inside else 'OUTSIDE'}")


def compare(args: argparse.Namespace, name: str, costs: dict) -> dict:
    profile = read_profile(args.results / f"profile-{name}.json")
    (domain,) = profile.domains.values()
    pred = predict(costs, domain)
    meas = measured_speedups(args.results / f"dense-{name}")
    rows, within = [], 0
    for key in sorted(meas):
        m, lo, hi = meas[key]
        p = pred[key]
        ok = min(lo, m * (1 - TOLERANCE)) <= p.speedup <= max(hi, m * (1 + TOLERANCE))
        within += ok
        rows.append((key, p.speedup, p.interval, m, lo, hi, ok))
    best_pred = best_depths(pred)
    agree = {}
    for b in LOADS:
        options = {0: (1.0, 1.0, 1.0), **{k: meas[(b, k)] for k in DEPTHS}}
        best = max(options, key=lambda k: (options[k][0], -k))
        _, lo, hi = options[best]
        chosen = best_pred[b]
        agree[b] = (chosen, best, chosen == best or lo <= options[chosen][0] <= hi)
    al = " ".join(f"{domain.accept_length(k):.2f}" for k in DEPTHS)
    print(f"\n{name}: profile {domain.domain} ({domain.samples} requests), AL(k) = {al}")
    print("  load depth  predicted [95%]        measured [95%]         within")
    for (b, k), ps, (plo, phi), m, lo, hi, ok in rows:
        print(f"  c={b:<3} k={k}  {ps:.3f} [{plo:.3f}, {phi:.3f}]  {m:.3f} [{lo:.3f}, {hi:.3f}]"
              f"  {'yes' if ok else 'NO'}")
    print(f"  within max(5 %, interval): {within} of {len(rows)} ({within / len(rows):.0%})")
    print("  best depth per load (predicted / dense): " + ", ".join(
        f"c={b} {c}/{d}{'' if ok else ' NO'}" for b, (c, d, ok) in agree.items()))
    return {"within": within, "cells": len(rows),
            "best_agree": sum(ok for _, _, ok in agree.values()), "loads": len(LOADS)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=Path("results/bench-surface"))
    ap.add_argument("--time-scale", type=float, default=0.25)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--requests-per-stream", type=int, default=4)
    ap.add_argument("--max-cells", type=int, default=42, help="40 %% of the dense grid's 105")
    ap.add_argument("--question-cells", type=int, default=32,
                    help="the question's grid.search.max_cells (with --confirm-cells: 35 %% of "
                         "the dense 112 at most)")
    ap.add_argument("--confirm-cells", type=int, default=7)
    ap.add_argument("--unforced-scale", type=float, default=1.15,
                    help="engine.options.unforced_spec_cost_scale of --phases wrong")
    ap.add_argument("--node", default="",
                    help="HARDWARE/MODEL simulator profiles for every run (e.g. h200/llama3.1-8b; "
                         "default: the default node)")
    ap.add_argument("--phases", default="profile,surface,dense",
                    help="which runs to make before comparing (none: compare the runs made)")
    args = ap.parse_args()
    args.results = args.results.resolve()
    args.results.mkdir(parents=True, exist_ok=True)
    phases = set(args.phases.split(","))
    wall = {}
    for name in DRAFTERS if "profile" in phases else ():
        wall[f"profile-{name}"] = profile_run(args, name)
    if "surface" in phases:
        wall["surface"] = surface_run(args)
    for name in DRAFTERS if "dense" in phases else ():
        wall[f"dense-{name}"] = dense_run(args, name)
    if "question" in phases:
        wall["question"] = question_run(args)
    if "dense128" in phases:
        wall["dense128"] = dense128_run(args)
    if "wrong" in phases:
        wall.update(wrong_runs(args))
    for question, dense in (("question", "dense128"), ("wrong-question", "wrong-dense128")):
        if (args.results / question).is_dir() and (args.results / dense).is_dir():
            compare_question(args, question, dense)
    if wall:
        print("wall (s): " + ", ".join(f"{k} {v:.0f}" for k, v in wall.items())
              + f"; total {sum(wall.values()):.0f}")
    if not (args.results / "surface").is_dir():
        return 0
    trace = json.loads((args.results / "surface" / "search.json").read_text())
    res = trace["result"]
    read = read_run(args.results / "surface", Slo(), trace["rates"])
    costs = interpolated(read.costs, tuple(trace["lattice"]), tuple(trace["depths"]))
    print(f"SIMULATION (the simulator at time_scale {args.time_scale}, {args.results})")
    used = starts(args.results / "surface")
    print(f"surface: stop {res['stop']}, {res['cells']} cells "
          f"({res['cells'] / res['dense_cells']:.0%} of the dense grid's {res['dense_cells']}), "
          f"{used} server starts ({used / res['dense_starts']:.0%} of {res['dense_starts']}); "
          f"design loads {res['design']['loads']} depths {res['design']['depths']}")
    for c in res["length_checks"]:
        print(f"  length check c={c['load']} k={c['depth']}: {c['difference']:+.3f} "
              f"{c['interval']} {'one cost' if c['agrees'] else 'DEPENDS on the length'}")
    summary = {name: compare(args, name, costs) for name in DRAFTERS}
    print("\nsummary: " + "; ".join(
        f"{n}: {s['within']}/{s['cells']} within, best depth {s['best_agree']}/{s['loads']}"
        for n, s in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
