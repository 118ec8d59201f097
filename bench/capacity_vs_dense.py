"""The capacity search against the dense load grid, on the simulator (SIMULATION numbers).

One `python -m grid.run` measures the dense grid: EAGLE-3 at every load of the capacity
search's lattice (conf/sweep/capacity_search.yaml: concurrency 1..64, 2^(1/3) apart, 16 loads).
The capacity search (`grid.search.kind=capacity`) chooses its cells from the same set (the same
cell ids), so it is replayed here on the dense run's committed cells, as its run loop replays a
run folder (grid/execute/search.py): each step sees only the cells its predecessors chose.
Both read each load's attainment the same way (grid/analysis/capacity.py: its exact 95 %
interval, meets / misses / undecided). Printed: every load's attainment, the dense capacity
(the report's) with its interval, the search's with its interval, cliff and cells, and whether
the search's capacity lies inside the dense interval with at most 40 % of the dense cells (the
goal; exit 1 otherwise).

    python bench/capacity_vs_dense.py                        # runs the dense grid, then compares
    python bench/capacity_vs_dense.py --run results/dense    # compares on a run already made
    python bench/capacity_vs_dense.py --results /tmp/two load.requests_per_stream=2 \\
        load.min_requests=8                                  # the same with other settings
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import run_grid

from grid.analysis import Slo
from grid.plan.search import search_space
from grid.report.data import load_run
from grid.run import make_plan

SWEEP = "+sweep=capacity_search"
GOAL = 0.4
"""The search's cells as a share of the dense grid's, at most."""


def _load(x: float | None) -> str:
    return "none" if x is None or x == float("-inf") else f"c={x:g}"


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
        wall, _, _ = run_grid([SWEEP, "grid.search.kind=null", "load.concurrency="
                               + ",".join(map(str, lattice)), *args.overrides], args.results,
                              "dense")
        print(f"dense grid: {len(lattice)} cells in {wall:.0f} s (log {args.results}/dense.log)")
    assert planned.search is not None
    slo = Slo(planned.cfg.slo.ttft_ms, planned.cfg.slo.tpot_ms, planned.cfg.slo.e2e_ms)
    steps, _ = planned.search.replay(run_dir, slo)
    trace = planned.search.trace(steps, None)["result"]
    data = load_run(run_dir, slo)
    assert data.operator is not None
    dense = next(c for c in data.operator.capacities if c.load_kind == "concurrency")
    print(f"SIMULATION, SLO {slo.describe()}; each load's attainment (steady-window requests, "
          "exact 95 % interval):")
    for x, a in zip(dense.loads, dense.attainments, strict=True):
        lo, hi = a.interval
        chosen = " (searched)" if str(int(x)) in trace["attainment"] else ""
        print(f"  c={x:g}: {a.value:.3f} [{lo:.3f}, {hi:.3f}] of {a.requests} requests, "
              f"{a.verdict(dense.target)}{chosen}")
    cap = trace["capacity"]
    inside = cap is not None and dense.lo <= cap <= dense.hi
    share = trace["cells"] / len(lattice)
    print(f"dense: capacity {_load(dense.capacity)}, interval {_load(dense.lo)} .. "
          f"{_load(dense.hi)}, {len(lattice)} cells")
    print(f"search: capacity {_load(cap)}, interval {_load(trace['interval'][0])} .. "
          f"{_load(trace['interval'][1])} (undecided: "
          f"{', '.join(map(_load, trace['undecided'])) or 'none'}; "
          f"{trace['unmeasured']} of its loads not measured), stop {trace['stop']}, cliff "
          f"{trace['cliff']}, {trace['cells']} cells ({share:.0%} of the dense grid)")
    print(f"inside the dense interval: {inside}; at most {GOAL:.0%} of its cells: "
          f"{share <= GOAL}")
    return 0 if inside and share <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
