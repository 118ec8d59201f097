"""The break-even search against the dense (load x forced length) grid, on the simulator
(SIMULATION numbers).

One `python -m grid.run` measures the dense grid: the baseline and EAGLE-3 with every forced
accept length (`variant.forced_acceptance.length`, 9 lengths from 1 to k + 1 = 4) at every
load, plus EAGLE-3 unforced (the drafter's own acceptance, for the report's bands). The
break-even search (`grid.search.kind=breakeven`) over the same loads and lengths chooses its
cells from the same set (the same cell ids: a test checks it, tests/grid/questions/
breakeven/test_plan.py), so it is replayed here on the dense run's committed cells, exactly as
its run loop replays a run folder (grid/execute/search.py): each step sees only the cells its
predecessors chose. Both curves are then computed by the report's code
(grid/analysis/breakeven.py) from their cells: the dense one from every cell, the search's from
the cells it chose. Printed per load: both break-even lengths with their 95 % intervals,
whether the search's lies inside the dense interval, and the cells each used.

    python bench/breakeven_vs_dense.py                       # runs the dense grid, then compares
    python bench/breakeven_vs_dense.py --run results/dense   # compares on a run already made
    python bench/breakeven_vs_dense.py --results /tmp/h200 hardware=h200 model=llama3.1-8b
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

from grid.analysis.breakeven import Level, curves
from grid.analysis.cellstats import CellStats
from grid.questions.breakeven.steps import chosen, replay
from grid.report.data import load_run
from grid.run import make_plan

LENGTHS = (1.0, 1.375, 1.75, 2.125, 2.5, 2.875, 3.25, 3.625, 4.0)
LOADS = (1, 2, 4, 8, 16, 32, 64)


def common(args: argparse.Namespace) -> list[str]:
    return [f"workload.max_new_tokens={args.max_new_tokens}",
            f"engine.options.time_scale={args.time_scale}", *args.overrides]


def dense_overrides(args: argparse.Namespace, results: Path) -> list[str]:
    lengths = ",".join(str(a) for a in LENGTHS)
    return ["variant=baseline,eagle3", f"variant.forced_acceptance.length=null,{lengths}",
            "grid.exclude=[{variant:baseline,variant.forced_acceptance.length:["
            + lengths + "]}]", "load.concurrency=" + ",".join(map(str, LOADS)),
            *common(args), f"results_dir={results}", "run.id=dense"]


def search_overrides(args: argparse.Namespace, results: Path) -> list[str]:
    return ["variant=baseline,eagle3", "grid.search.kind=breakeven",
            f"grid.search.concurrency=[{LOADS[0]},{LOADS[-1]}]", "grid.search.resolution=2",
            "grid.search.lengths=[" + ",".join(str(a) for a in LENGTHS) + "]",
            f"grid.search.max_cells={args.max_cells}", *common(args),
            f"results_dir={results}"]


def subset(stats: CellStats, ids: set[str]) -> CellStats:
    return CellStats(stats.table[stats.table.cell_id.isin(ids)].reset_index(drop=True),
                     stats.replicates, stats.slo, stats.n_replicates)


def shown(lv: Level | None) -> str:
    return "-" if lv is None else lv.describe()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, help="a dense run folder made by this script")
    ap.add_argument("--results", type=Path, default=Path("results/bench-breakeven"))
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--max-cells", type=int, default=64)
    ap.add_argument("overrides", nargs="*", help="more overrides for both runs, e.g. "
                    "hardware=h200 model=llama3.1-8b")
    args = ap.parse_args()
    run = args.run
    if run is None:
        cmd = [sys.executable, "-m", "grid.run", *dense_overrides(args, args.results)]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        run = args.results / "dense"
    data = load_run(run)
    dense = {lv.load: lv for lv in curves(data.stats, data.cells, data.baseline)}
    setup = make_plan(search_overrides(args, run.parent)).search
    assert setup is not None
    value = dict(zip(data.stats.table.cell_id.astype(str),
                     data.stats.table.output_tok_s.astype(float), strict=True))
    measured = {p: value[c.cell_id] for p, c in setup.points.items()
                if math.isfinite(value.get(c.cell_id, math.nan))}
    missing = len(setup.points) - len(measured)
    steps = replay(setup.space, measured)
    picked = {setup.points[p].cell_id for p in chosen(steps)}
    search = {lv.load: lv for lv in curves(subset(data.stats, picked), data.cells,
                                           data.baseline)}
    print(f"SIMULATION (the simulator, {run}); dense run cells without a throughput: {missing}")
    print(f"search: stop {steps[-1].stop} after {len(picked)} cells in {len(steps) - 1} "
          f"steps; the dense grid: {setup.space.dense_cells} cells "
          f"({len(picked) / setup.space.dense_cells:.0%})")
    print(f"{'load':>5}  {'dense a* [95%]':<34} {'search a* [95%]':<34} inside")
    inside = 0
    for load in setup.space.loads:
        d, s = dense.get(float(load)), search.get(float(load))
        ok = (d is not None and s is not None and d.lo - 1e-9 <= s.value <= d.hi + 1e-9)
        inside += ok
        print(f"c={load:<3}  {shown(d):<34} {shown(s):<34} {'yes' if ok else 'NO'}")
    print(f"search inside the dense interval at {inside} of {len(setup.space.loads)} loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
