"""One surface, every drafter, on a real engine: the draft-model ladder's rungs as drafters
(`+sweep=cpu_breakeven`, the speculation question on real vLLM 0.32.0 on the CPU: the trained
target with noise 0.2 as its own drafter, 0, 0.1, 0.35, 0.6 as `grid.search.drafters`, 4 drafts
per step, c = 1, 2, 4; docs/lesson.md "A ladder of drafters"; or a dense ladder of the same
rungs with repeats). Every rung has the target's shape, so every rung's speculative step costs
the same k = 4 draft passes and one verify of 5 tokens: the node's surface c(B, 4)
(grid/analysis/surface/cost.py) from two rungs, the target rung (every draft accepted) and one
other, predicts every other rung's speedup from its acceptance profile alone (vLLM's
per-position counter at c = 1, grid/analysis/surface/profile.py):

    speedup(B) = AL(4) / c(B, 4)

Out of sample: the predicted rungs' throughputs never enter the surface. Each prediction is
held to max(10 %, the rung's repeat spread at that load: (max - min) / mean of its repeats'
tok/s; 0 with one repeat, as the question measures). Each choice of the second rung gives its
own surface; all are shown, and the two rungs' costs set side by side per load say how far
the step cost depends on the acceptance (it should not, if a step costs the same whatever is
accepted). A rung is named by its draft model's folder (the cells' `server_args`).

Numbers: real engine, CPU, tiny trained models (the cells of the runs given); nothing runs.

    python bench/surface_ladder.py results/RUN [results/RUN2 ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from grid.analysis import Slo, analyse_cells
from grid.analysis.points import points
from grid.analysis.surface import (
    Cost,
    ForcedPoint,
    Throughput,
    predict,
    profile_from_cells,
    surface,
)
from grid.analysis.surface.cost import step_cost
from grid.store.loader import load_cells, load_requests

DEPTH = 4
"""The ladder's drafts per step (conf/sweep/cpu_breakeven.yaml)."""
TARGET = "noise-0.00"
"""The target rung: the target as its own draft model, every draft accepted (AL 5)."""
GOAL = 0.10
"""Held to max(10 %, the repeat spread), as the twin on a real engine (docs/twin.md)."""


def named(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with `variant` the rung's name: `baseline`, else its draft model's folder
    (`server_args`' speculative_draft_model_path, `.../ladder/noise-0.20` -> `noise-0.20`)."""
    def name(variant: str, args: object) -> str:
        if variant == "baseline":
            return variant
        path = json.loads(str(args)).get("speculative_draft_model_path") if args else None
        return str(path).rstrip("/").rsplit("/", 1)[-1] if path else variant
    return cells.assign(variant=[name(str(v), a) for v, a in zip(cells.variant,
                                                                 cells.server_args,
                                                                 strict=True)])


def measured(run_dir: Path) -> tuple[dict[tuple[str, int], Throughput], pd.DataFrame,
                                     dict[tuple[str, int], float]]:
    """(rung or `baseline`, load) -> tok/s over its repeats with replicates; the cells; and
    each rung's repeat spread per load."""
    cells = named(load_cells(run_dir))
    requests = load_requests(run_dir)
    stats = analyse_cells(cells, requests, Slo(), replicates=1000, seed=0)
    out = {}
    for p in points(stats, ("output_tok_s",)):
        out[(p.variant, int(p.load))] = Throughput(p.values["output_tok_s"],
                                              p.replicates["output_tok_s"])
    spread = {}
    for (variant, load), group in cells[cells.status == "done"].groupby(["variant",
                                                                        "concurrency"]):
        tok = group.output_tok_s.astype(float)
        spread[(str(variant), int(str(load)))] = float((tok.max() - tok.min()) / tok.mean())
    return out, cells, spread


def lengths(cells: pd.DataFrame) -> dict[tuple[str, int], float]:
    """(rung, load) -> its decode accept length as vLLM counted it (tokens per verify step)."""
    spec = cells[(cells.status == "done") & (cells.variant != "baseline")]
    return {(str(v), int(str(c))): float(g.accept_length_decode.mean())
            for (v, c), g in spec.groupby(["variant", "concurrency"])}


def evaluate(run_dir: Path) -> list[str]:
    tok, cells, spread = measured(run_dir)
    length = lengths(cells)
    loads = sorted({load for name, load in tok if name == "baseline"})
    rungs = sorted({name for name, _ in tok if name != "baseline"})
    base = {b: tok[("baseline", b)] for b in loads}
    first = cells[(cells.variant != "baseline") & (cells.concurrency == min(loads))]
    profiles = profile_from_cells(first.assign(rung=first.variant), by="rung").domains
    lines = [f"{run_dir}: loads {loads}, rungs {', '.join(rungs)} (k = {DEPTH})", ""]
    lines.append("cost c(B, 4) of each rung alone (AL x T_base / T_rung), by load:")
    for name in rungs:
        alone = [step_cost(ForcedPoint(b, DEPTH, length[(name, b)], tok[(name, b)]), base[b])
                 for b in loads]
        lines.append(f"  {name} (AL {length[(name, loads[0])]:.2f}): " + ", ".join(
            f"c={b} {c.value:.2f} [{c.interval[0]:.2f}, {c.interval[1]:.2f}]"
            for b, c in zip(loads, alone, strict=True)))
    counts = {"constant": [0, 0], "linear": [0, 0]}
    inside = 0
    for other in (r for r in rungs if r != TARGET):
        pair = {name: {b: step_cost(ForcedPoint(b, DEPTH, length[(name, b)], tok[(name, b)]),
                                    base[b]) for b in loads} for name in (TARGET, other)}
        costs = surface([ForcedPoint(b, DEPTH, length[(n, b)], tok[(n, b)])
                         for n in (TARGET, other) for b in loads], base)
        lines += ["", f"surface from {TARGET} and {other}; the other rungs predicted "
                  "(constant: c(B, 4) the two rungs' mean, as forced cells assume; linear: c "
                  "a line in the accept length through the two):"]
        for name in rungs:
            if name in (TARGET, other):
                continue
            pred = predict(costs, profiles[name])
            for b in loads:
                p = pred[(b, DEPTH)]
                meas = tok[(name, b)].value / base[b].value
                tol = max(GOAL, spread.get((name, b), 0.0))
                line = along(pair[TARGET][b], pair[other][b], p.accept_length)
                words = []
                for how, value in (("constant", p.speedup), ("linear", line)):
                    err = value / meas - 1
                    ok = abs(err) <= tol
                    counts[how][0] += ok
                    counts[how][1] += 1
                    words.append(f"{how} {value:.3f} ({err:+.1%}{'' if ok else ' MISS'})")
                lo, hi = p.interval
                inside += lo <= meas <= hi
                lines.append(f"  {name} c={b} (AL(4) {p.accept_length:.2f} from c={loads[0]}): "
                             f"measured {meas:.3f}; {words[0]} [{lo:.3f}, {hi:.3f}], "
                             f"{words[1]}; held to +-{tol:.0%}")
    lines += [""] + [f"{how}: within max(10 %, repeat spread) {n} of {total}"
                     for how, (n, total) in counts.items()]
    lines.append(f"constant: measured speedup inside the prediction's 95 % interval {inside} "
                 f"of {counts['constant'][1]}")
    return lines


def along(one: Cost, two: Cost, length: float) -> float:
    """The speedup at accept length `length` with the cost a line in the length through two
    rungs' costs (each measured at its own length)."""
    (l1,), (l2,) = one.lengths, two.lengths
    cost = one.value + (two.value - one.value) * (length - l1) / (l2 - l1)
    return length / cost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path,
                    help="+sweep=cpu_breakeven run folders (or dense ladders)")
    ns = ap.parse_args()
    for run_dir in ns.runs:
        print("\n".join(evaluate(run_dir)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
