"""The crossover search with a twin as its prior against the same search without one, on the
simulator (SIMULATION numbers), each step as a user runs it (`python -m grid.run`, `python -m
grid.twin`), each into its own fresh run folder:

1. the user's few cells: baseline and EAGLE-3 at --twin-loads (c = 1, 8, 64, 256) on the
   profile;
2. `python -m grid.twin` on them, starting from another profile's factors (--start, the
   default profile's: RTX PRO 6000 / Kimi-K2.5-class), so the twin learns the node from the
   cells, not from its own profile;
3. `+sweep=crossover_search` over 1..256 without a prior (coarse levels first);
4. the same with `grid.search.prior=<the twin>` (the two levels around its predicted
   crossover first).

Prints, side by side: each search's cells, wall time (the whole command), bracket and stop, and
the crossover with its 95 % interval from decision.json; then how far the twin's predicted
speedups were from the levels the prior search measured. The two searches answer the same
question when their brackets overlap. Same cell settings as bench/search_vs_dense.py (32
output tokens, 256 running requests allowed, the simulator at --time-scale 4 on a 2-core
machine, servers packed on the node so a search keeps both).

    python bench/twin_prior.py --out /tmp/twin-prior
    python bench/twin_prior.py --out /tmp/twin-prior-sat --saturated
    python bench/twin_prior.py --out /tmp/twin-prior --reuse   # re-print what --out holds
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import run_grid, run_twin


def answers(run_dir: Path) -> dict:
    decision = json.loads((run_dir / "decision.json").read_text())
    cross = next(iter(decision.get("crossovers") or []), {})
    res = decision["search"]["result"]
    return {"cells": res["cells"], "bracket": res["bracket"], "stop": res["stop"],
            "crossover": cross.get("statement", "-"), "prior": res.get("prior")}


def overlap(a: list, b: list) -> bool:
    """Two brackets [pays up to, stops paying at] (None: open) hold a common load."""
    lo = max(x if x is not None else 0 for x in (a[0], b[0]))
    hi = min(x if x is not None else 10**9 for x in (a[1], b[1]))
    return lo <= hi


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/twin_prior.py")
    ap.add_argument("--profile", default="h200:llama3.1-8b", help="hardware:model")
    ap.add_argument("--twin-loads", default="1,8,64,256")
    ap.add_argument("--start", default="default", help="the profile the twin starts from")
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-running", type=int, default=256)
    ap.add_argument("--saturated", action="store_true",
                    help="fit the twin to the cells whose load generator saturated too (on a "
                         "2-core machine the c=64 and c=256 baselines: left out, the twin "
                         "extrapolates above c=8)")
    ap.add_argument("--out", type=Path, default=None, help="keep the run folders here")
    ap.add_argument("--reuse", action="store_true",
                    help="do not run what --out already holds")
    ns = ap.parse_args(argv)
    hardware, model = ns.profile.split(":")
    common = [f"hardware={hardware}", f"model={model}",
              f"++engine.options.time_scale={ns.time_scale}",
              f"workload.max_new_tokens={ns.max_new_tokens}",
              f"variant.args.max_running_requests={ns.max_running}",
              "grid.exclusive_node=false", "load.client_cpus=0.5"]
    folder = ns.out or Path(tempfile.mkdtemp(prefix="twin-prior-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"run folders: {folder}", flush=True)
    walls: dict[str, float] = {}

    def once(name: str, overrides: list[str]) -> Path:
        walls[name], run_dir, _ = run_grid([*overrides, *common], folder, name, ns.reuse)
        return run_dir

    measured = once("measured", ["+sweep=concurrency", f"load.concurrency={ns.twin_loads}"])
    twin = measured / "twin.json"
    if not (ns.reuse and twin.exists()):
        t0 = time.monotonic()
        run_twin(measured, ["--start", ns.start, *(["--saturated"] if ns.saturated else [])],
                 folder / "twin.log")
        print(f"twin fitted in {time.monotonic() - t0:.0f} s ({folder / 'twin.log'})")
    runs = {"crossover search": once("search", ["+sweep=crossover_search"]),
            "with the twin as prior": once("prior", ["+sweep=crossover_search",
                                                      f"grid.search.prior={twin}"])}
    got = {name: answers(run_dir) for name, run_dir in runs.items()}
    print(f"\nthe user's cells: {2 * len(ns.twin_loads.split(','))} at c = {ns.twin_loads}, "
          f"{walls['measured']:.0f} s")
    print("\n| search | cells | wall s | bracket (stop) | crossover (95 % interval) |")
    print("|---|---|---|---|---|")
    for (name, a), key in zip(got.items(), ("search", "prior"), strict=True):
        print(f"| {name} | {a['cells']} | {walls[key]:.0f} | {a['bracket']} ({a['stop']}) | "
              f"{a['crossover']} |")
    plain, prior = got["crossover search"], got["with the twin as prior"]
    print(f"\nsame answer (brackets overlap): {overlap(plain['bracket'], prior['bracket'])}; "
          f"cells {prior['cells']} vs {plain['cells']}")
    check = prior["prior"] or {}
    print(f"the twin predicted {check.get('predicted_bracket')}; at the measured levels:")
    for row in check.get("levels", []):
        print(f"  c={row['load']}: predicted {row['predicted']:+.1%}, measured "
              f"{row['measured']:+.1%} [{row['interval'][0]:+.1%}, {row['interval'][1]:+.1%}]"
              f"{'' if row['inside'] else ' (outside)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
