"""The capacity search against the dense load grid, on the simulator (SIMULATION numbers).

One `python -m grid.run` measures the dense grid: EAGLE-3 at every load of the capacity
search's lattice (concurrency 1..64, √2 apart: 12 loads). The capacity search
(`grid.search.kind=capacity`, conf/sweep/capacity_search.yaml) chooses its cells from the same
set (the same cell ids), so it is replayed here on the dense run's committed cells, as its run
loop replays a run folder (grid/execute/search.py): each step sees only the cells its
predecessors chose. The dense capacity is the report's (grid/analysis/capacity.py, with its
95 % interval); printed: both capacities, whether the search's lies inside the dense interval,
the cliff flag, and the cells each used.

    python bench/capacity_vs_dense.py                        # runs the dense grid, then compares
    python bench/capacity_vs_dense.py --run results/dense    # compares on a run already made
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grid.analysis import Slo  # noqa: E402
from grid.plan.search import search_space  # noqa: E402
from grid.report.data import load_run  # noqa: E402
from grid.run import make_plan  # noqa: E402

SWEEP = "+sweep=capacity_search"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", type=Path, default=Path("/tmp/capacity_vs_dense"))
    p.add_argument("--run", type=Path, help="a dense run folder already made")
    p.add_argument("overrides", nargs="*")
    args = p.parse_args()
    planned = make_plan([SWEEP, *args.overrides, f"results_dir={args.results}",
                         "run.id=dense"])
    lattice = search_space(planned.cfg).lattice
    run_dir = args.run or args.results / "dense"
    if args.run is None:
        subprocess.run([sys.executable, "-m", "grid.run", SWEEP, "grid.search.kind=null",
                        "load.concurrency=" + ",".join(map(str, lattice)), *args.overrides,
                        f"results_dir={args.results}", "run.id=dense"], check=False)
    assert planned.search is not None
    slo = Slo(planned.cfg.slo.ttft_ms, planned.cfg.slo.tpot_ms, planned.cfg.slo.e2e_ms)
    steps, _ = planned.search.replay(run_dir, slo)
    trace = planned.search.trace(steps, None)["result"]
    data = load_run(run_dir, slo)
    assert data.operator is not None
    dense = next(c for c in data.operator.capacities if c.load_kind == "concurrency")
    inside = trace["capacity"] is not None and dense.lo <= trace["capacity"] <= dense.hi
    print(f"SIMULATION: dense capacity c={dense.capacity:g} [{dense.lo:g}, {dense.hi:g}] "
          f"from {len(lattice)} cells; search c={trace['capacity']} interval "
          f"{trace['interval']} ({trace['stop']}, cliff={trace['cliff']}) from "
          f"{trace['cells']} cells ({trace['cells'] / len(lattice):.0%} of the dense grid); "
          f"inside the dense interval: {inside}")
    return 0 if inside else 1


if __name__ == "__main__":
    sys.exit(main())
