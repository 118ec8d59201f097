"""Coverage of every answer the dense analysis gives, against a known truth (SIMULATION,
clock-free): the speedup at each load, the crossover, the recommended threshold and the
capacity under the SLOs, each with today's method and the one before it beside.

The cells come from the simulator's own scheduler driven without a clock or HTTP (the driver
`python -m engines.sim.calibrate` fits on: engines/sim/calibrate.py `closed_loop_tok_s`): the
default profile's baseline and EAGLE-3 (the default sweep's server flags, shipped coding
prompts, 256 output tokens, closed loop, 6 requests a stream), `--seeds` simulator seeds per
variant and load, each request's sent time, TTFT and end kept. The statistics are under test,
not the wire: bench/coverage_repeats.py measures the speedup through real server processes.

A trial measures every (variant, load) `--repeats` times; each repeat is one of the seeds'
cells, drawn at random, with every modelled duration multiplied by the repeat's start factor
f (what `engine.options.speed_jitter` does to a server start). Two noise models:

- `per_start`: f ~ U[0.9, 1.1] for every start, either variant (what the pooled-t method
  assumes: one noise process for the run);
- `per_variant`: the variants' starts differ: the baseline's f ~ U[0.97, 1.03], EAGLE-3's
  f ~ U[0.8, 1.2] (one pooled spread is then wrong for both).

The truth of each answer is what infinitely many repeats would give: the throughput of a
(variant, load) is the seeds' mean jitter-free throughput x E[1/f] (ln(b/a) / (b - a) for
U[a, b]), the speedup their ratio, the crossover and the threshold the decision's own rules
(specgrid_metrics/crossover.py `crossover_of`; the end of the run of loads that pay, from the
lowest) on those speedups, and a load's SLO attainment the seeds' steady-window share within
the SLOs averaged over f (times scale by f, the window's requests do not change), its
capacity the highest load, from the lowest up, whose attainment reaches 0.9.

An answer covers when its claim holds the truth: the speedup's and the crossover's 95 %
intervals; the threshold's plausible range (the `undetermined` range when it is undetermined;
before: the range from the crossover's interval); the capacity's range from the last load
shown to meet the SLOs to the load below the first shown to miss them (an `undetermined`
capacity claims nothing and is counted apart; before: its interval), and, apart, whether the
capacity named is the true one (before: named whether or not a load was shown to meet).
"Before" is the same cells through the analysis as it was: one pool of between-repeat noise
for the run's variants, the pooled degrees of freedom at every point, the threshold read from
the point crossover (0 when no load was significantly faster), the repeats' attainments pooled
as one binomial sample and a capacity claimed with no load shown to meet.

    python bench/coverage_answers.py                  # 100 trials x 2 models, ~5-8 min, 2 cores
    python bench/coverage_answers.py --trials 10      # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from _common import ROOT
from scipy.stats import binomtest

import grid.analysis.capacity as capacity_mod
import grid.analysis.points as points_mod
import grid.analysis.repeats as repeats_mod
from engines.sim.calibrate import closed_loop_tok_s, default_cases, make_engine, workload_prompts
from engines.sim.profile import load_profile
from grid.analysis import Slo, analyse_cells, decide
from grid.analysis.capacity import ATTAINMENT, Attainment, boundary, capacities
from grid.analysis.cellstats import request_arrays
from specgrid_metrics.crossover import crossover_of
from specgrid_metrics.intervals import cell_window
from specgrid_metrics.window import inside

LOADS = (1, 2, 4, 8, 16)
PER_STREAM = 6
OUTPUT_TOKENS = 256
SLO = Slo(ttft_ms=2000.0, tpot_ms=20.0)
"""TPOT <= 20 ms: the jitter-free baseline holds it to c=4 (16 ms), EAGLE-3 to c=2: a capacity
inside the tested loads for both."""
MODELS = {"per_start": {"baseline": (0.9, 1.1), "eagle3": (0.9, 1.1)},
          "per_variant": {"baseline": (0.97, 1.03), "eagle3": (0.8, 1.2)}}


def simulate(seeds: int) -> dict[tuple[str, int], list[pd.DataFrame]]:
    """(variant, load) -> one request frame per seed, jitter-free, on the modelled clock."""
    profile = load_profile("default")
    cases = default_cases(profile)
    texts = workload_prompts(profile.data["calibration"]["scenario"]["prompts"])
    out: dict[tuple[str, int], list[pd.DataFrame]] = {}
    for variant in ("baseline", "eagle3"):
        for c in LOADS:
            for seed in range(seeds):
                served: list = []
                closed_loop_tok_s(make_engine(profile, cases[f"{variant}_single"]["argv"], seed),
                                  texts, OUTPUT_TOKENS, c, c * PER_STREAM, served)
                sent = np.array([r.arrival for r in served])
                ttft = np.array([r.first_token_at for r in served]) - sent
                e2e = np.array([r.finished_at for r in served]) - sent
                n = np.array([r.n for r in served], dtype=float)
                verify = [r.verify_ct if variant == "eagle3" else None for r in served]
                out.setdefault((variant, c), []).append(pd.DataFrame({
                    "status": "ok", "sent_at": sent, "ttft_s": ttft, "e2e_s": e2e,
                    "tpot_s": (e2e - ttft) / (n - 1), "output_tokens": n,
                    "spec_verify_ct": pd.array(verify, dtype="Int64")}))
    return out


def inverse_mean(a: float, b: float) -> float:
    """E[1/f] for f ~ U[a, b]."""
    return math.log(b / a) / (b - a)


def truth(pool: dict[tuple[str, int], list[pd.DataFrame]], model: dict) -> dict:
    """Every answer's true value under `model` (module doc)."""
    cells, requests = frames(pool, {k: [(i, 1.0) for i in range(len(v))]
                                    for k, v in pool.items()})
    table = analyse_cells(cells, requests, SLO, replicates=10).table
    tok = table.groupby(["variant", "concurrency"]).output_tok_s.mean()
    speed = {c: tok["eagle3", c] * inverse_mean(*model["eagle3"])
             / (tok["baseline", c] * inverse_mean(*model["baseline"])) - 1 for c in LOADS}
    curve = np.array([speed[c] for c in LOADS])
    run = next((i for i, s in enumerate(curve) if s <= 0), len(LOADS))
    threshold = None if run == len(LOADS) else (LOADS[run - 1] if run else 0)
    caps = {}
    for variant in ("baseline", "eagle3"):
        factors = np.linspace(*model[variant], 41)
        attain = [np.mean([share_within(frame, c, f) for frame in pool[variant, c]
                           for f in factors]) for c in LOADS]
        held = next((i for i, a in enumerate(attain) if a < ATTAINMENT), len(LOADS))
        caps[variant] = {"capacity": LOADS[held - 1] if held else None, "attainment": attain}
    return {"speedup": speed, "crossover": crossover_of(np.array(LOADS, float), curve),
            "threshold": threshold, "capacity": caps}


def share_within(frame: pd.DataFrame, c: int, f: float) -> float:
    """The steady window's share of requests within the SLOs, every duration x f."""
    arrays = request_arrays(frame.assign(**{k: frame[k] * f for k in
                                            ("sent_at", "ttft_s", "e2e_s", "tpot_s")}))
    lived = inside(arrays.sent, arrays.end, cell_window(arrays, c, True))
    good = (arrays.ttft * 1e3 <= SLO.ttft_ms) & (arrays.tpot * 1e3 <= SLO.tpot_ms)
    return float(good[lived].mean())


def frames(pool: dict[tuple[str, int], list[pd.DataFrame]],
           draws: dict[tuple[str, int], list[tuple[int, float]]]
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cells and requests frames: per (variant, load), one cell per (seed, factor) drawn."""
    cells, reqs = [], []
    for (variant, c), picks in draws.items():
        for r, (seed, f) in enumerate(picks):
            cid = f"{variant}-c{c}-r{r}"
            frame = pool[variant, c][seed]
            reqs.append(frame.assign(cell_id=cid, **{k: frame[k] * f for k in
                                                     ("sent_at", "ttft_s", "e2e_s", "tpot_s")}))
            cells.append({"cell_id": cid, "variant": variant, "workload": "coding",
                          "concurrency": c, "rate": np.nan, "status": "done", "engine": "sim",
                          "simulated": True, "client_saturated": False, "error_rate": 0.0,
                          "requests_error": 0, "num_requests": len(frame), "repeat": r,
                          "factors": json.dumps({"concurrency": c, "repeat": r}),
                          "accept_length": 2.8 if variant == "eagle3" else None})
    return pd.DataFrame(cells), pd.concat(reqs, ignore_index=True)


@contextlib.contextmanager
def before() -> Iterator[None]:
    """The analysis as it was: one pool for the run's variants, the pooled degrees of freedom
    at every point, and a load's repeats pooled as one binomial sample."""
    scale, pooled, noise = repeats_mod.scale_of, capacity_mod.pooled, points_mod.by_variant

    def one_pool(groups):  # type: ignore[no-untyped-def]
        run = repeats_mod.pooled([v for values in groups.values() for v in values])
        return dict.fromkeys(groups, run)

    def old_scale(values, noise):  # type: ignore[no-untyped-def]
        return max(noise.variance, repeats_mod.own_variance(values)), noise.dof

    def old_pooled(parts):  # type: ignore[no-untyped-def]
        return Attainment(sum(a.good for a in parts), sum(a.requests for a in parts),
                          any(a.over_saturated for a in parts))
    repeats_mod.scale_of, capacity_mod.pooled, points_mod.by_variant = (old_scale, old_pooled,
                                                                         one_pool)
    try:
        yield
    finally:
        repeats_mod.scale_of, capacity_mod.pooled, points_mod.by_variant = scale, pooled, noise


def _tested_below(x: float) -> int:
    below = [c for c in LOADS if c <= x]
    return max(below) if below else 0


def judged(cells: pd.DataFrame, requests: pd.DataFrame, real: dict, old: bool) -> dict:
    """One trial's answers and whether each holds the truth."""
    stats = analyse_cells(cells, requests, SLO)
    decision = decide(stats)
    table = decision.speedups.set_index("load")
    out: dict = {f"speedup_c{c}": bool(table.lo[c] <= real["speedup"][c] <= table.hi[c])
                 for c in LOADS}
    (cross,) = decision.crossovers
    out["crossover"] = bool(cross.lo <= real["crossover"] <= cross.hi)
    true_n = math.inf if real["threshold"] is None else real["threshold"]
    if old:  # the rule before: the point crossover, 0 when no load paid significantly
        pays = bool((table.verdict == "faster").any())
        value = 0 if not pays else (None if cross.point == math.inf
                                    else _tested_below(cross.point))
        low = 0 if cross.lo == -math.inf else (
            _tested_below(cross.lo) if cross.lo != math.inf else max(LOADS))
        high = math.inf if cross.hi == math.inf else _tested_below(cross.hi)
        out["threshold"] = bool(low <= true_n <= high)
        out["off"] = value == 0
    else:
        (rec,) = decision.recommendations
        low, high = rec["plausible_range"]
        out["threshold"] = bool(low <= true_n <= (math.inf if high is None else high))
        out["off"] = rec["verdict"] == "off"
        out["undetermined_threshold"] = rec["verdict"] == "undetermined"
    for cap in capacities(stats, {}):
        known = real["capacity"][cap.variant]["capacity"]
        x = -math.inf if known is None else known
        rule = boundary(cap.attainments, cap.target)  # the claim before: the rule's capacity
        claimed = (cap.capacity if not cap.undetermined else None) if not old else (
            LOADS[rule.capacity] if rule.capacity is not None else -math.inf)
        out[f"capacity_point_{cap.variant}"] = None if claimed is None else bool(claimed == x)
        if cap.undetermined and not old:
            out[f"capacity_{cap.variant}"] = None  # no claim
        elif cap.served or cap.undetermined:  # before, a capacity was claimed all the same
            high = cap.hi if cap.bracketed else math.inf
            out[f"capacity_{cap.variant}"] = bool(cap.lo <= x <= high)
        else:  # shown to miss at the lowest load
            out[f"capacity_{cap.variant}"] = known is None
    return out


def coverage_interval(k: int, n: int) -> list[float]:
    ci = binomtest(k, n).proportion_ci(0.95, method="exact") if n else None
    return [round(ci.low, 3), round(ci.high, 3)] if ci else [math.nan, math.nan]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "coverage_answers.json")
    args = ap.parse_args()
    began = time.monotonic()
    pool = simulate(args.seeds)
    print(f"{len(pool) * args.seeds} clock-free cells in {time.monotonic() - began:.0f} s",
          flush=True)
    result: dict = {"label": "SIMULATION (clock-free)", "settings": vars(args) | {
        "loads": LOADS, "per_stream": PER_STREAM, "output_tokens": OUTPUT_TOKENS,
        "slo": SLO.as_dict(), "models": MODELS, "out": args.out.name}, "models": {}}
    for name, model in MODELS.items():
        real = truth(pool, model)
        rng = np.random.default_rng(0)
        rows = {"now": [], "before": []}
        for _ in range(args.trials):
            draws = {k: [(int(rng.integers(args.seeds)), float(rng.uniform(*model[k[0]])))
                         for _ in range(args.repeats)] for k in pool}
            cells, requests = frames(pool, draws)
            rows["now"].append(judged(cells, requests, real, old=False))
            with before():
                rows["before"].append(judged(cells, requests, real, old=True))
        summary = {}
        for method, trials in rows.items():
            table = pd.DataFrame(trials)
            summary[method] = {}
            for answer in table.columns:
                claimed = table[answer].dropna().astype(bool)
                summary[method][answer] = {
                    "share": round(float(claimed.mean()), 3) if len(claimed) else None,
                    "of": int(len(claimed)), "interval": coverage_interval(
                        int(claimed.sum()), int(len(claimed)))}
        result["models"][name] = {"truth": real, "summary": summary}
        print(f"\n{name} (truth: speedups " + ", ".join(
            f"c={c} {100 * s:+.1f} %" for c, s in real["speedup"].items())
              + f"; crossover {real['crossover']:.2f}; threshold {real['threshold']}; capacity "
              + ", ".join(f"{v} {c['capacity']}" for v, c in real["capacity"].items()) + ")")
        for answer in summary["now"]:
            now, was = summary["now"][answer], summary["before"].get(answer)
            print(f"  {answer:<26} now {now['share']} of {now['of']} {now['interval']}"
                  + (f"   before {was['share']} of {was['of']} {was['interval']}" if was
                     else ""), flush=True)
    result["wall_s"] = round(time.monotonic() - began)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wall {result['wall_s']} s; {args.out}")


if __name__ == "__main__":
    main()
