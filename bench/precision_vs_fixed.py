"""Precision-targeted cells against the fixed-count grid, on the simulator (SIMULATION
numbers): `python -m grid.run +sweep=concurrency` twice, each into its own fresh run folder,
once as shipped (4 requests per stream, at least 8) and once with
`load.target={metric: output_tok_s, half_width: H}` (cap: 4x the fixed count). Prints per cell
the requests measured and the report's throughput interval (relative half-width, from the
report's own analysis of each run folder), the totals, and each run's answer (crossover and
recommendation, from decision.json).

`--queues` runs the detector on constructed queues instead (no server): Poisson arrivals on k
FIFO servers with deterministic or lognormal service times, at 80 % to 200 % of capacity (and
bursty arrivals, gamma gaps of shape 0.25, at 80 and 95 %), ten seeds each, checked every
0.5 s for a minute: cells flagged, when first, and how many checks from a cell's first flag on
flagged it too.

`--open-loop RATE` also runs one baseline cell at an arrival rate (15/s is twice the default
profile's capacity at 96 output tokens) with a schedule of 100 s of arrivals, and prints when it
stopped and why. `--offline RUN_DIR...` runs only the over-saturation detector over the request
rows of existing run folders, as the load generator would have seen them every 0.5 s, and
prints the cells it would have flagged (false positives on closed-loop cells below capacity).

`--check-cost` measures what those mid-cell checks (actors/loadgen/stopping.py) cost the client:
the same cell with and without them against one simulator process (default profile, modelled
time), alternating, `--rounds` times. "with" runs a target that is never reached (±0.01 %), so
the checks run until the cell's count, plus the over-saturation check; "without" runs neither.
Per run: the event loop's latency p50 / p99 (the self-check's probe), the event-loop thread's
CPU over the steady window, the dispatch lag p99, the process's CPU per request (both
threads), and for "with" the checks made, their CPU in all and the longest.

    python bench/precision_vs_fixed.py --out /tmp/precision
    python bench/precision_vs_fixed.py --open-loop 15 --out /tmp/precision
    python bench/precision_vs_fixed.py --offline results/concurrency-sim-...
    python bench/precision_vs_fixed.py --queues
    python bench/precision_vs_fixed.py --check-cost --rounds 2
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from collections.abc import Sequence
from pathlib import Path
from statistics import median

import numpy as np
from _common import ROOT, launch_sim, run_grid, stopping

from actors.loadgen.runner import run_load_sync
from actors.loadgen.spec import LoadSpec, Prompt
from grid.analysis.cellstats import REQUEST_COLUMNS, analyse_cells
from grid.loader import load_cells, load_requests
from specgrid_metrics import saturation
from specgrid_metrics.precision import parse_targets

CHECK_EVERY_S = 0.5
UNREACHABLE = parse_targets({"metric": "output_tok_s", "half_width": 0.0001})


def cell_table(run_dir: Path) -> list[dict]:
    """Per cell: variant, concurrency, requests, the report's relative half-width of
    output_tok_s, its loose flag and the stop columns."""
    cells = load_cells(run_dir)
    stats = analyse_cells(cells, load_requests(run_dir, columns=REQUEST_COLUMNS)).table
    merged = stats.merge(cells[["cell_id", "stop_reason", "stop_detail"]], on="cell_id",
                         how="left") if "stop_reason" in cells else stats
    out = []
    for r in merged.sort_values(["variant", "concurrency"]).itertuples():
        half = (r.output_tok_s_hi - r.output_tok_s_lo) / 2 / r.output_tok_s
        out.append({"variant": r.variant, "c": int(r.concurrency),
                    "requests": int(r.measured_requests), "half": float(half),
                    "loose": bool(r.loose_interval), "window": int(r.window_requests),
                    "stop": getattr(r, "stop_reason", None)})
    return out


def answer(run_dir: Path) -> dict:
    decision = json.loads((run_dir / "decision.json").read_text())
    cross = next(iter(decision.get("crossovers") or []), {})
    rec = next(iter(decision.get("recommendations") or []), {})
    return {"crossover": cross.get("statement", "-"), "recommendation": rec.get("statement",
                                                                               "-")}


def offline(run_dirs: Sequence[Path]) -> int:
    """The detector over recorded request rows, every CHECK_EVERY_S of each cell."""
    total = flagged = 0
    for run_dir in run_dirs:
        cells = load_cells(run_dir)
        req = load_requests(run_dir, columns=["cell_id", "status", "scheduled_at", "sent_at",
                                              "ttft_s", "e2e_s", "output_tokens"])
        for cell in cells.itertuples():
            r = req[req.cell_id == cell.cell_id]
            sent = r.sent_at.to_numpy(float)
            sched = r.scheduled_at.to_numpy(float)
            ttft = r.ttft_s.to_numpy(float, na_value=np.nan)
            end = sent + r.e2e_s.to_numpy(float, na_value=np.nan)
            tokens = np.where(r.status == "ok", r.output_tokens.to_numpy(float, na_value=0), 0)
            closed = cell.rate != cell.rate  # NaN: closed loop
            hits = []
            for now in np.arange(sent.min() + CHECK_EVERY_S, sent.max(), CHECK_EVERY_S):
                seen = (sent if closed else sched) <= now
                first = np.where(sent + ttft <= now, ttft, np.nan)[seen]
                done = np.where(end <= now, end, np.nan)[seen]
                sat = (saturation.closed_loop(sent[seen], first, done, tokens[seen], now,
                                              int(cell.concurrency))
                       if closed else saturation.open_loop(sched[seen], done, tokens[seen],
                                                           now))
                if sat.over_saturated:
                    hits.append((now - sent.min(), sat.reason))
            total += 1
            flagged += bool(hits)
            load = f"c={int(cell.concurrency)}" if closed else f"{cell.rate:g}/s"
            verdict = (f"FLAGGED at {hits[0][0]:.1f} s: {hits[0][1]}" if hits
                       else "never flagged")
            print(f"{run_dir.name} {cell.variant} {load}: {len(r)} requests, "
                  f"{int(np.ceil((sent.max() - sent.min()) / CHECK_EVERY_S))} checks: {verdict}")
    print(f"{flagged} of {total} cells flagged")
    return 0


def fifo(arrivals: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """End times of a FIFO queue with `servers` parallel servers."""
    free = [0.0] * servers
    ends = np.empty(arrivals.size)
    for i, (a, s) in enumerate(zip(arrivals, service, strict=True)):
        k = int(np.argmin(free))
        ends[i] = max(a, free[k]) + s
        free[k] = ends[i]
    return ends


def queues() -> int:
    print("| load | arrivals | servers x service | service CV | cells flagged (of 10) | first "
          "flagged at (s) | checks flagged from the first flag on |")
    print("|---|---|---|---|---|---|---|")
    cases = [(load, 1.0) for load in (0.8, 0.95, 1.25, 2.0)] + [(0.8, 0.25), (0.95, 0.25)]
    for load, shape in cases:  # shape: of the gamma gaps (1: Poisson, 0.25: bursty, CV 2)
        for servers, service, cv in ((64, 8.0, 0.0), (64, 8.0, 0.5), (16, 2.0, 0.5)):
            rate = load * servers / service
            firsts, held, after = [], 0, 0
            for seed in range(10):
                rng = np.random.default_rng(seed)
                arrivals = np.cumsum(rng.gamma(shape, 1 / (rate * shape), int(rate * 70)))
                sigma = np.sqrt(np.log(1 + cv ** 2))
                times = (np.full(arrivals.size, service) if cv == 0 else
                         service * rng.lognormal(-sigma ** 2 / 2, sigma, arrivals.size))
                ends = fifo(arrivals, times, servers)
                flags = []
                for now in np.arange(5.0, 60.0, CHECK_EVERY_S):
                    seen = arrivals <= now
                    done = np.where(ends[seen] <= now, ends[seen], np.nan)
                    flags.append((now, saturation.open_loop(
                        arrivals[seen], done, np.ones(int(seen.sum())), now).over_saturated))
                hits = [i for i, (_, f) in enumerate(flags) if f]
                firsts.append(flags[hits[0]][0] if hits else None)
                if hits:
                    held += len(hits)
                    after += len(flags) - hits[0]
            hit = [f for f in firsts if f is not None]
            when = f"{min(hit):.1f}-{max(hit):.1f}" if hit else "-"
            kept = f"{held} of {after}" if after else "-"
            kind = "Poisson" if shape == 1.0 else f"gamma {shape:g}"
            print(f"| {load:.0%} | {kind} | {servers} x {service:g} s | {cv:g} | {len(hit)} | "
                  f"{when} | {kept} |")
    return 0


def checked_cell(url: str, concurrency: int, requests: int, checks: bool) -> dict[str, float]:
    """One cell of `--check-cost` through the load generator, with the checks or without."""
    rows = [json.loads(line) for line in
            (ROOT / "workloads" / "prompts" / "coding.jsonl").read_text().splitlines() if line]
    spec = LoadSpec(url=url, prompts=tuple(Prompt(r["prompt_id"], r["text"],
                                                  r.get("domain", "coding")) for r in rows),
                    concurrency=concurrency, num_requests=requests, warmup_requests=2,
                    max_new_tokens=96, targets=UNREACHABLE if checks else (), min_requests=8,
                    stop_over_saturated=checks, check_interval_s=0.5)
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = run_load_sync(spec)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    s = result.stats
    return {"loop_p50_ms": 1e3 * (s["loop_lag_p50_s"] or 0), "loop_p99_ms":
            1e3 * (s["loop_lag_p99_s"] or 0), "loop_cpu_pct": s["client_cpu_percent"],
            "dispatch_p99_ms": 1e3 * (s["client_dispatch_lag_p99_s"] or 0),
            "cpu_ms_per_request": 1e3 * cpu / max(1, len(result.rows)),
            "checks": s["precision_checks"], "check_cpu_s": s["check_cpu_s"],
            "check_max_ms": 1e3 * s["check_max_s"], "stop": s["stop_reason"]}


def check_cost(ns: argparse.Namespace) -> int:
    server, url = launch_sim(["--sim-time-scale", str(ns.time_scale),
                              "--max-running-requests", "64"])
    with stopping(server):
        checked_cell(url, 4, 8, False)  # the server's first requests, not measured
        print("| c | requests | checks | loop latency p50 / p99 ms | loop thread CPU % | "
              "dispatch lag p99 ms | process CPU ms per request | checks made, CPU s, "
              "longest ms |\n|---|---|---|---|---|---|---|---|")
        for c in ns.concurrency:
            n = ns.per_stream * c
            runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for r in range(ns.rounds):
                for checks in ((False, True) if r % 2 == 0 else (True, False)):
                    runs[checks].append(checked_cell(url, c, n, checks))
            for checks, rs in sorted(runs.items()):
                def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                    return median(x[key] for x in rs)

                each = ", ".join(f"{x['loop_p99_ms']:.3f}" for x in rs)
                made = (f"{med('checks'):.0f}, {med('check_cpu_s'):.2f}, "
                        f"{med('check_max_ms'):.1f}" if checks else "-")
                print(f"| {c} | {n} | {'with' if checks else 'without'} | "
                      f"{med('loop_p50_ms'):.3f} / {med('loop_p99_ms'):.3f} ({each}) | "
                      f"{med('loop_cpu_pct'):.1f} | {med('dispatch_p99_ms'):.2f} | "
                      f"{med('cpu_ms_per_request'):.2f} | {made} |", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/precision_vs_fixed.py")
    ap.add_argument("--half-width", type=float, default=0.05)
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="engine.options.time_scale (1 = modelled time)")
    ap.add_argument("--open-loop", type=float, default=None, metavar="RATE",
                    help="run only a baseline cell at this arrival rate (requests/s)")
    ap.add_argument("--offline", type=Path, nargs="+", default=None, metavar="RUN_DIR")
    ap.add_argument("--queues", action="store_true",
                    help="the detector on constructed queues only (no server)")
    ap.add_argument("--out", type=Path, default=None, help="keep the run folders here")
    ap.add_argument("--check-cost", action="store_true",
                    help="what the mid-cell checks cost the client only (one simulator)")
    ap.add_argument("--rounds", type=int, default=2, help="--check-cost: runs of each")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--per-stream", type=int, default=6, help="--check-cost: requests")
    ns = ap.parse_args(argv)
    if ns.queues:
        return queues()
    if ns.check_cost:
        return check_cost(ns)
    if ns.offline:
        return offline(ns.offline)
    folder = ns.out or Path(tempfile.mkdtemp(prefix="precision-vs-fixed-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"run folders: {folder}")
    common = [f"++engine.options.time_scale={ns.time_scale}"]
    if ns.open_loop is not None:
        n = int(100 * ns.open_loop)
        wall, run_dir, _ = run_grid(["variant=baseline", f"+grid.axes.rate=[{ns.open_loop}]",
                                     "workload.max_new_tokens=96", f"load.num_requests={n}",
                                     *common], folder, "open")
        cell = load_cells(run_dir).iloc[0]
        req = load_requests(run_dir, columns=["scheduled_at", "sent_at", "e2e_s"])
        issued = req.sent_at.max() - req.scheduled_at.min()
        print(f"rate {ns.open_loop:g}/s, {n} arrivals scheduled over 100 s: {len(req)} sent, "
              f"stopped issuing after {issued:.1f} s, reason {cell.stop_reason}: "
              f"{cell.stop_detail} (wall {wall:.0f} s)")
        return 0
    target = f"load.target={{metric:output_tok_s,half_width:{ns.half_width}}}"
    runs = {}
    for name, extra in (("fixed", []), ("targeted", [target])):
        wall, run_dir, _ = run_grid(["+sweep=concurrency", *common, *extra], folder, name)
        runs[name] = {"wall": wall, "cells": cell_table(run_dir), **answer(run_dir)}
    fixed, targeted = runs["fixed"], runs["targeted"]
    print(f"\n| cell | fixed: requests, ±half-width | ±{ns.half_width * 100:g} % target: "
          "requests, ±half-width, stop |")
    print("|---|---|---|")
    for f, t in zip(fixed["cells"], targeted["cells"], strict=True):
        loose = " (loose)" if f["loose"] else ""
        tloose = " (loose)" if t["loose"] else ""
        print(f"| {f['variant']} c={f['c']} | {f['requests']}, ±{f['half'] * 100:.1f} %{loose} "
              f"| {t['requests']}, ±{t['half'] * 100:.1f} %{tloose}, {t['stop']} |")
    nf = sum(c["requests"] for c in fixed["cells"])
    nt = sum(c["requests"] for c in targeted["cells"])
    wider = [c for c in targeted["cells"] if c["half"] > ns.half_width and c["stop"] != "cap"]
    print(f"\nrequests: fixed {nf}, targeted {nt} ({100 * nt / nf:.0f} %); wall {fixed['wall']:.0f}"
          f" s vs {targeted['wall']:.0f} s")
    print(f"loose cells: fixed {sum(c['loose'] for c in fixed['cells'])}, targeted "
          f"{sum(c['loose'] for c in targeted['cells'])}; targeted cells wider than the target "
          f"without saying so: {len(wider)}")
    for name, r in runs.items():
        print(f"{name}: {r['crossover']}; {r['recommendation']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
