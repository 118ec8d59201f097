"""The depth search against a dense (batch x depth) grid on the simulator (SIMULATION numbers):
`python -m grid.run` twice, each into its own fresh run folder: the dense grid (EAGLE-3 at every
depth of --depths and every level of the √2 lattice over --concurrency, the plain baseline at
every level, x --repeats) and `+sweep=depth_search` over the same levels and depths with
grid.search.max_repeats = --repeats and a budget that does not bind (the dense grid's size), so
the search stops when its answer is resolved. Every cell of the search is a cell the dense grid
also holds (same settings: those of +sweep=depth_search).

Prints, side by side: cells and wall time (the whole command: plan, Ray, server starts,
cells, report) of each; the dense grid's schedule (each level's best depth by point estimate,
tiers from each level to the next, as the search builds its own), the search's, and per
level whether they agree or, where they do not, whether the two depths are within min_effect
of each other in the dense grid's own measurements (what the goal allows); the search's
confirmation cells counted apart. Then the dense cells go to vLLM's own
`vllm.benchmarks.sweep.tune_speculative_k` (a subprocess of --vllm-python, as the tests run
vLLM's code; one record per dense cell, every repeat, vLLM's default scoring: median minus
1.4826 x MAD, 1 % tolerance), when that vLLM has it, or from --vllm-tuner, that file of a vLLM
source checkout run by --vllm-python (it imports only vLLM modules 0.32.0 has). No vLLM release
ships it yet (0.32.0 and 0.33.0 do not: it is on vLLM's main branch); without it the bench
says so.

    python bench/depth_vs_dense.py --max-new-tokens 32 --time-scale 4
    python bench/depth_vs_dense.py ... --repeats 2
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import ENGINES_PYTHON, run_grid

from grid.analysis import Slo
from grid.analysis.depth import schedule
from grid.analysis.search import lattice
from grid.loader import load_cells
from grid.questions.depth import DepthPlanned
from grid.questions.depth.steps import DepthStep
from grid.questions.measure import cell_throughputs
from grid.run import make_plan


def depth_of(variant: str) -> int | None:
    if variant == "baseline":
        return 0
    tag = "__speculative_num_steps-"
    return int(variant.split(tag)[1]) if tag in variant else None


def dense_values(run_dir: Path) -> dict[int, dict[int, float]]:
    """load -> depth -> mean output tok/s over repeats (the search's analysis: windowed)."""
    return {c: {d: sum(v) / len(v) for d, v in row.items()}
            for c, row in dense_runs(run_dir).items()}


def dense_runs(run_dir: Path) -> dict[int, dict[int, list[float]]]:
    """load -> depth -> each repeat's output tok/s (vLLM's tuner scores the runs itself)."""
    cells = load_cells(run_dir)
    values = cell_throughputs(run_dir, [_Id(i) for i in cells.cell_id], Slo())
    out: dict[int, dict[int, list[float]]] = {}
    for row in cells.itertuples():
        d = depth_of(str(row.variant))
        if d is not None and row.cell_id in values:
            out.setdefault(int(row.concurrency), {}).setdefault(d, []).append(
                values[row.cell_id].value)
    return out


class _Id:
    def __init__(self, cell_id: str) -> None:
        self.cell_id = cell_id


def tiers_of(best: dict[int, int]) -> list[list[int]]:
    """Each level's depth from it to the next level, the first from 1, equal ones merged."""
    out: list[list[int]] = []
    for c in sorted(best):
        if not out:
            out.append([1, best[c]])
        elif out[-1][1] != best[c]:
            out.append([c, best[c]])
    return out


def at(tiers: list[list[int]], c: int) -> int:
    return [d for start, d in tiers if start <= c][-1]


def replayed_on(run_dir: Path, overrides: list[str], folder: Path) -> tuple[int, list]:
    """The depth search's steps replayed on another run's committed cells (the dense grid's
    hold every cell the search may choose, under the same ids): the cells it would choose
    and its schedule, measurement noise between the two runs taken out."""
    setup = make_plan([*overrides, f"results_dir={folder / 'plan-only'}"]).search
    assert isinstance(setup, DepthPlanned)
    steps, _ = setup.replay(run_dir, Slo())
    searched = [s for s in steps if isinstance(s, DepthStep)]
    return sum(len(s.points) for s in searched), [list(t) for t in schedule(searched[-1].levels)]


def vllm_tune(python: str, runs: dict[int, dict[int, list[float]]], top: int,
              tuner: Path | None) -> str:
    """vLLM's own tune_speculative_k over the dense cells (one record per cell and repeat:
    batch size, its K, output tok/s; vLLM's default scoring with min_runs = the repeats), or
    why it cannot run. `tuner`: vLLM's tune_speculative_k.py from a source checkout."""
    records = [{"batch_size": c, "k": d, "output_throughput": v}
               for c, row in runs.items() for d, values in row.items() for v in values]
    repeats = min(len(values) for row in runs.values() for values in row.values())
    code = r"""
import importlib.util, json, sys
records, top, repeats, tuner = json.load(sys.stdin)
try:
    import vllm
    if tuner:
        spec = importlib.util.spec_from_file_location("tune_speculative_k", tuner)
        t = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(t)
    else:
        from vllm.benchmarks.sweep import tune_speculative_k as t
except ImportError as e:
    print(json.dumps({"error": f"vLLM {getattr(sys.modules.get('vllm'), '__version__', '?')} "
                      f"has no vllm.benchmarks.sweep.tune_speculative_k ({e}); give "
                      "--vllm-tuner with that file of a vLLM source checkout"}))
    raise SystemExit(0)
out = t.tune_speculative_k(records, batch_size_var="batch_size", k_var="k",
    objective_var="output_throughput", objective_direction="maximize", acceptance_var=None,
    min_runs=repeats, uncertainty_penalty=1.0, max_objective_relative_mad=0.1,
    max_acceptance_relative_mad=0.1, strict_acceptance_stability=False,
    relative_tolerance=0.01, max_batch_size=top)
print(json.dumps({"schedule": out["num_speculative_tokens_per_batch_size"]}))
"""
    payload = [records, top, repeats, str(tuner) if tuner else None]
    try:
        proc = subprocess.run([python, "-c", code], input=json.dumps(payload),
                              capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not run ({e})"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return f"failed: {proc.stderr.strip().splitlines()[-1:]}"
    answer = json.loads(lines[-1])
    return answer.get("error") or f"schedule {answer['schedule']}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/depth_vs_dense.py")
    ap.add_argument("--profile", default="h200:llama3.1-8b", help="hardware:model")
    ap.add_argument("--concurrency", nargs=2, type=int, default=[1, 128])
    ap.add_argument("--depths", nargs="+", type=int, default=[0, 1, 2, 3, 5, 7])
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-running", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--min-effect", type=float, default=0.05)
    ap.add_argument("--vllm-python", default=ENGINES_PYTHON)
    ap.add_argument("--vllm-tuner", type=Path, default=None,
                    help="vLLM's vllm/benchmarks/sweep/tune_speculative_k.py from a source "
                         "checkout, where --vllm-python's vLLM has none")
    ap.add_argument("--out", type=Path, default=None, help="keep the run folders here")
    ap.add_argument("--reuse", action="store_true",
                    help="do not run what --out already holds (its run folders and logs)")
    ns = ap.parse_args(argv)
    low, high = ns.concurrency
    levels = lattice(low, high, math.sqrt(2))
    hardware, model = ns.profile.split(":")
    common = ["+sweep=depth_search", f"hardware={hardware}", f"model={model}",
              f"++engine.options.time_scale={ns.time_scale}",
              f"workload.max_new_tokens={ns.max_new_tokens}",
              f"variant.args.max_running_requests={ns.max_running}",
              "grid.exclusive_node=false", "load.client_cpus=0.5"]
    spec = [d for d in ns.depths if d > 0]
    def extra(c: int, r: int) -> str:
        return f"{{variant: baseline, concurrency: {c}" + (f", repeat: {r}}}" if ns.repeats > 1
                                                         else "}")
    baseline = ",".join(extra(c, r) for c in levels for r in range(ns.repeats))
    repeat = ([f"load.repeat={','.join(str(r) for r in range(ns.repeats))}"]
              if ns.repeats > 1 else [])
    dense_cells = len(levels) * len(ns.depths) * ns.repeats
    grids = {
        "dense": ["grid.search.kind=null", "variant=baseline,eagle3",
                  f"variant.args.speculative_num_steps={','.join(map(str, spec))}",
                  f"load.concurrency={','.join(map(str, levels))}",
                  *repeat, "grid.exclude=[{variant: baseline}]", f"grid.include=[{baseline}]"],
        "depth search": [f"grid.search.concurrency=[{low},{high}]",
                         f"grid.search.depths=[{','.join(map(str, ns.depths))}]",
                         f"grid.search.max_repeats={ns.repeats}",
                         f"grid.search.max_cells={dense_cells}",
                         f"grid.search.min_effect={ns.min_effect}"],
    }
    folder = ns.out or Path(tempfile.mkdtemp(prefix="depth-vs-dense-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"run folders: {folder}", flush=True)
    walls, dirs = {}, {}
    for name, overrides in grids.items():
        run_id = f"{name.split()[0]}-{hardware}-{model}-r{ns.repeats}"
        walls[name], dirs[name], _ = run_grid([*common, *overrides], folder, run_id, ns.reuse)
    dense = dense_values(dirs["dense"])
    best = {c: max(row, key=lambda d: (row[d], -d)) for c, row in dense.items()}
    dense_tiers = tiers_of(best)
    trace = json.loads((dirs["depth search"] / "search.json").read_text())
    res = trace["result"]
    search_tiers = res["schedule"]
    searched = sum(len(s["points"]) for s in trace["steps"] if s["phase"] == "depth")
    confirm = res["cells"] - searched
    replay_cells, replay_tiers = replayed_on(dirs["dense"], [*common, *grids["depth search"]],
                                             folder)

    def agreement(tiers: list[list[int]], c: int) -> str:
        ours, theirs = at(tiers, c), best[c]
        row = dense[c]
        gap = row[theirs] / row[ours] - 1 if ours in row else math.nan
        return ("same" if ours == theirs else
                f"within min_effect ({gap:+.1%})" if gap <= ns.min_effect else
                f"DIFFERS ({theirs} is {gap:+.1%} over {ours})")

    rows = [f"| c={c} | {best[c]} | {at(search_tiers, c)}: {agreement(search_tiers, c)} | "
            f"{at(replay_tiers, c)}: {agreement(replay_tiers, c)} |" for c in levels]
    print("\n| grid | cells | wall s | schedule [from batch, depth] |")
    print("|---|---|---|---|")
    print(f"| dense | {dense_cells} | {walls['dense']:.0f} | {dense_tiers} |")
    print(f"| depth search | {searched} ({100 * searched / dense_cells:.0f} %) + {confirm} "
          f"confirming | {walls['depth search']:.0f} "
          f"({100 * walls['depth search'] / walls['dense']:.0f} %) | {search_tiers} "
          f"({res['stop']}; confirmation {res.get('confirm_stop')}: "
          f"{[t['stands'] for t in res.get('tiers', [])]}) |")
    print(f"| depth search replayed on the dense cells | {replay_cells} "
          f"({100 * replay_cells / dense_cells:.0f} %) | - | {replay_tiers} |")
    print("\n| level | dense best | search (its own cells) | search replayed on the dense "
          "cells |\n|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nvLLM's tune_speculative_k on the dense cells: "
          f"{vllm_tune(ns.vllm_python, dense_runs(dirs['dense']), levels[-1], ns.vllm_tuner)}")
    print("\ndense tok/s by level and depth:")
    for c in levels:
        print(f"  c={c}: " + ", ".join(f"{d}: {dense[c][d]:.0f}" for d in sorted(dense[c])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
