"""The adaptive searches against a dense grid, on the simulator (SIMULATION numbers): for each
profile, `python -m grid.run` three times, each into its own fresh run folder: a dense
concurrency grid over 1..256 in √2 steps (16 levels x baseline, EAGLE-3, x --repeats), the
crossover search (`+sweep=crossover_search`) and the threshold search
(`+sweep=threshold_search`) over the same range, both with grid.search.max_repeats = --repeats,
so every level is measured as often as the dense grid measures it (a dense grid of one
measurement per level against a search that may repeat would compare two kinds of rigor).
Prints cells, wall time (the whole command: planning, Ray, server starts, cells, report) and
the answers side by side: the crossover with its 95 % interval and the recommended
speculative_disable_above_batch from each run's decision.json (the threshold search's own:
confirmed on the engine's thresholds), and each search's bracket and stop from search.json.

All runs use the same cell settings (those of +sweep=concurrency: 4 requests per stream, 96
output tokens unless --max-new-tokens), so the searches' cells are cells the dense grid also
holds. Both variants run up to 256 requests at once (--max-running; the shipped variants cap
the running batch at 64, beyond which a grid to 256 measures the same batch and a queue). To
fit a 2-core machine the simulator can run slower than modelled time (--time-scale 4: each
modelled step sleeps four times its duration, so a CPU-starved simulator does not distort the
ratios between variants, which are what the crossover reads). Unless --exclusive, every run
(dense too) packs its servers on the node's GPUs (grid.exclusive_node=false; a TP1 server
takes one of the 8), so a search keeps both servers running between its steps
(docs/search.md); the dense grid runs one server after the other either way.

    python bench/search_vs_dense.py --max-new-tokens 32 --profiles default
    python bench/search_vs_dense.py --max-new-tokens 32 --time-scale 4 --profiles h200:llama3.1-8b
    python bench/search_vs_dense.py ... --repeats 3
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import run_grid

from grid.analysis.search import lattice

PROFILES = ("default", "h200:llama3.1-8b")


def profile_overrides(profile: str) -> list[str]:
    if profile == "default":
        return []
    hardware, model = profile.split(":")
    return [f"hardware={hardware}", f"model={model}"]


def answers(run_dir: Path) -> dict:
    decision = json.loads((run_dir / "decision.json").read_text())
    cross = next(iter(decision.get("crossovers") or []), {})
    rec = next(iter(decision.get("recommendations") or []), {})
    out = {"cells": decision["cells"]["done"], "crossover": cross.get("crossover"),
           "interval": cross.get("interval"), "statement": cross.get("statement", "-"),
           "threshold": rec.get("speculative_disable_above_batch")}
    search = decision.get("search")
    if search:
        out["bracket"], out["stop"] = search["result"]["bracket"], search["result"]["stop"]
        out["threshold_stop"] = search["result"].get("threshold_stop")
    return out


def _num(x: object) -> float:
    if x in ("inf", "-inf"):
        return math.inf if x == "inf" else -math.inf
    return float(x) if x is not None else math.nan  # type: ignore[arg-type]


def inside(dense: dict, search: dict) -> bool:
    """The search's bracket holds the dense grid's crossover, or their intervals overlap."""
    point = _num(dense["crossover"])
    low, high = search.get("bracket") or [None, None]
    lo_b = -math.inf if low is None else float(low)
    hi_b = math.inf if high is None else float(high)
    if lo_b <= point <= hi_b:
        return True
    d_lo, d_hi = (_num(v) for v in dense["interval"])
    return d_lo <= hi_b and lo_b <= d_hi


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/search_vs_dense.py")
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES),
                    help="default, or hardware:model")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="engine.options.time_scale of every server (1 = modelled time)")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--max-running", type=int, default=256,
                    help="variant.args.max_running_requests of both variants (the shipped "
                         "variants cap at 64: above it a grid to 256 measures queueing, the "
                         "running batch stays 64)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="measurements per level: the dense grid's repeats and the searches' "
                         "grid.search.max_repeats")
    ap.add_argument("--exclusive", action="store_true",
                    help="one server per node (grid.exclusive_node, the default of a run): a "
                         "search then keeps only the last server between steps; without it "
                         "every run packs its servers on the node's GPUs and the search keeps "
                         "both (load.client_cpus=0.5 so both fit this 2-CPU machine)")
    ap.add_argument("--out", type=Path, default=None, help="keep the run folders here")
    ns = ap.parse_args(argv)
    levels = ",".join(str(c) for c in lattice(1, 256, math.sqrt(2)))
    common = [f"++engine.options.time_scale={ns.time_scale}",
              f"workload.max_new_tokens={ns.max_new_tokens}",
              f"variant.args.max_running_requests={ns.max_running}"]
    if not ns.exclusive:  # both TP1 servers fit on the node at once: a search keeps both
        common += ["grid.exclusive_node=false", "load.client_cpus=0.5"]
    repeats = ",".join(str(r) for r in range(ns.repeats))
    grids = (("dense", ["+sweep=concurrency", f"load.concurrency={levels}",
                        f"grid.axes.repeat=[{repeats}]"]),
             ("crossover search", ["+sweep=crossover_search",
                                   f"grid.search.max_repeats={ns.repeats}"]),
             ("threshold search", ["+sweep=threshold_search",
                                   f"grid.search.max_repeats={ns.repeats}"]))
    folder = ns.out or Path(tempfile.mkdtemp(prefix="search-vs-dense-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"run folders: {folder}")
    print("| profile | grid | cells | wall s | crossover (95 % interval) | bracket (stop) "
          "| recommended threshold |")
    print("|---|---|---|---|---|---|---|")
    for profile in ns.profiles:
        tag = profile.replace(":", "-")
        results: dict[str, dict | None] = {}
        for name, overrides in grids:
            run_id = f"{name.split()[0]}-{tag}-r{ns.repeats}"
            wall, run_dir, code = run_grid([*overrides, *profile_overrides(profile), *common],
                                           folder, run_id, check=False)
            if code != 0:
                print(f"| {profile} | {name} | failed (exit {code}, see {run_dir}.log) |")
                results[name] = None
                continue
            results[name] = {"wall": wall, **answers(run_dir)}
        dense = results.get("dense")
        for name, r in results.items():
            if r is None:
                continue
            share = ""
            if name != "dense" and dense:
                share = (f" ({100 * r['cells'] / dense['cells']:.0f} % of cells, "
                         f"{100 * r['wall'] / dense['wall']:.0f} % of wall time; crossover "
                         f"{'inside' if inside(dense, r) else 'OUTSIDE'} the dense answer)")
            bracket = (f"{r['bracket']} ({r['stop']})" if "bracket" in r else "-")
            threshold = r["threshold"]
            if r.get("threshold_stop"):
                threshold = f"{threshold} ({r['threshold_stop']})"
            print(f"| {profile} | {name} | {r['cells']} | {r['wall']:.0f} | {r['statement']} "
                  f"| {bracket} | {threshold} |{share}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
