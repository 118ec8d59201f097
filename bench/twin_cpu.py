"""A twin of a real engine: real vLLM 0.32.0 on this machine's CPU serving the project's trained
target, baseline and with its trained draft model (`+sweep=cpu_twin`: c = 1, 2, 4, 8, two output
lengths, 16 cells), then `python -m grid.twin RUN --holdout 2,8`: the simulator fitted to the
cells at loads 1 and 4 (starting from the `cpu` hardware profile and the model's own
config.json) predicts the cells at loads 2 and 8 it never saw. Each step as a user runs it.

Prints `grid.twin`'s own printout (every held-out cell measured and predicted, the twin's
leave-one-load-out error, its factors), then how many held-out output tok/s lie within ±10 %
and every held-out speedup: measured (with its 95 % interval from the run's decision.json) and
predicted, and whether the predicted sign agrees where the measured interval excludes zero.
Then a split by output length (--holdout-workloads: fit on one output length's cells, predict
the other's), `grid.twin`'s printout again.

Numbers: measured ones are real engine, CPU, tiny trained models; predicted ones SIMULATION
(twin of the run).

    python bench/twin_cpu.py --out /tmp/twin-cpu                 # run the sweep, fit, print
    python bench/twin_cpu.py --out /tmp/twin-cpu --reuse         # fit and print again
    python bench/twin_cpu.py --out /tmp/twin-omp2 ++variant.env.OMP_NUM_THREADS=2   # overrides
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd  # the run's own tables, as a notebook reads them
from _common import ENGINES_PYTHON, run_grid, run_twin

RUN_ID = "cpu_twin"


def measured_speedups(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(workload label, load) -> the run's own speedup row (decision.json): point, interval."""
    decision = json.loads((run_dir / "decision.json").read_text())
    out = {}
    for row in decision.get("speedups") or []:
        if row.get("load_kind", "concurrency") == "concurrency":
            out[(str(row["workload"]), int(row["load"]))] = row
    return out


def fit(run_dir: Path, holdout: str, replicates: int, flag: str = "--holdout"
        ) -> dict[str, Any]:
    # --saturated: on a 2-core machine the load generator shares the cores with the engine and
    # flags most cells of a tiny model (chunks merged into one read); the twin then models
    # the server as this client measures it
    log = run_dir.parent / f"twin-{holdout}.log"
    run_twin(run_dir, [flag, holdout, "--replicates", str(replicates), "--saturated"], log)
    print(log.read_text())
    doc = json.loads((run_dir / "twin.json").read_text())
    (run_dir.parent / f"twin-{holdout}.json").write_text(json.dumps(doc, indent=1))
    return doc


def report(doc: dict[str, Any], speedups: dict[tuple[str, int], dict[str, Any]],
           workloads: dict[str, str]) -> None:
    split = doc["twin"]["holdout_split"]
    tok = [r for r in split["cells"] if r["metric"] == "output_tok_s"]
    within = sum(abs(r["error_pct"]) <= 10.0 for r in tok)
    print(f"output tok/s within +-10 %: {within} of {len(tok)}; largest |error| "
          f"{max(abs(r['error_pct']) for r in tok):.1f} %")
    print(f"\n{'speedup at':<14}{'tokens':>7}{'measured [95 % interval]':>30}{'predicted':>11}"
          f"  sign")
    agree = decided = 0
    for r in sorted((r for r in split["cells"] if r["metric"] == "speedup"),
                    key=lambda r: (r["workload"], r["concurrency"])):
        row = speedups.get((r["workload"], int(r["concurrency"])), {})
        lo, hi = row.get("lo"), row.get("hi")
        excludes = lo is not None and hi is not None and (lo > 0 or hi < 0)
        # decision.json gives variant / baseline - 1; the twin's rows the ratio
        same = (r["predicted"] - 1) * (r["measured"] - 1) > 0
        if excludes:
            decided += 1
            agree += same
        interval = f"[{lo:+.1%}, {hi:+.1%}]" if lo is not None else "[-]"
        print(f"c={r['concurrency']:<12}{workloads[r['workload']]:>7}"
              f"{r['measured'] - 1:>+12.1%} {interval:>17}{r['predicted'] - 1:>+11.1%}  "
              f"{'agrees' if same else 'DIFFERS'}{'' if excludes else ' (undecided)'}")
    print(f"sign right at {agree} of {decided} held-out loads whose interval excludes zero")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reuse", action="store_true", help="fit the run --out already holds")
    ap.add_argument("--holdout", default="2,8", help="loads held out (default 2,8)")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--run-id", default=RUN_ID, help="the run folder's name under --out")
    ap.add_argument("overrides", nargs="*",
                    help="more grid.run overrides for the sweep (++variant.env.OMP_NUM_THREADS=2)")
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    run_dir = ns.out / ns.run_id
    if not ns.reuse:
        wall, run_dir, _ = run_grid(["+sweep=cpu_twin", f"engine.python={ENGINES_PYTHON}",
                                     *ns.overrides], ns.out, ns.run_id)
        print(f"+sweep=cpu_twin: {wall:.0f} s (log {ns.out}/{ns.run_id}.log)")
    table = pd.read_parquet(run_dir / "cells")
    cells = table[table.status == "done"]
    workloads = {str(w): str(w).rsplit("-", 1)[-1] for w in cells.workload}
    print(f"{len(cells)} done cells; measured output tok/s (real engine, CPU):")
    for _, c in cells.sort_values(["variant", "workload", "concurrency"]).iterrows():
        print(f"  {c.variant:<20} c={int(c.concurrency):<3} {workloads[c.workload]:>3} tokens "
              f"{c.output_tok_s:8.1f} tok/s  TPOT p50 {c.tpot_p50_s * 1e3:6.1f} ms")
    speedups = measured_speedups(run_dir)
    doc = fit(run_dir, ns.holdout, ns.replicates)
    report(doc, speedups, workloads)
    print("\nby output length: fitted on every load of one, the other predicted "
          "(extrapolation in output length)")
    for workload in sorted(workloads):
        fit(run_dir, workload, 0, "--holdout-workloads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
