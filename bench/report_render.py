"""Benchmark: render the report of a 100-cell run with 100,000 request rows.

The run is generated synthetically (closed-loop timelines with a chosen speed per variant and
concurrency, 64 output tokens with their per-token gaps, server metric samples once a second)
and written to Parquet through the real results writer (grid/store/results.py), then the report is
rendered as `python -m grid.report` does it: load through the loader, analyse (steady-state
windows, 1000 bootstrap replicates per cell), decide, draw the plots, write report.html,
report.md, decision.json and the PNGs. Each phase is timed separately; the figure that counts
is the whole render.

    python bench/report_render.py [--cells 100] [--requests 1000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from grid.report import write_report
from grid.report.data import load_run
from grid.store.results import write_cell

VARIANTS = ("baseline", "eagle3", "eagle3__off_above-8", "eagle3__off_above-32")
CONCURRENCY = (1, 4, 16, 32, 64)
TOKENS = 64


def speed(variant: str, c: int) -> float:
    """Per-stream tok/s: the baseline slows with the batch; EAGLE-3 starts 40 % ahead and
    slows faster; thresholds fall back to the baseline above their batch."""
    base = 100.0 / (1 + c / 8)
    if variant == "baseline":
        return base
    spec = 1.4 * 100.0 / (1 + c / 4)
    if "__off_above-" in variant and c > int(variant.rsplit("-", 1)[1]):
        return 0.97 * base
    return spec


def make_run(run_dir: Path, cells: int, requests: int) -> int:
    rng = np.random.default_rng(0)
    n_cells = 0
    repeat = 0
    while n_cells < cells:
        for variant in VARIANTS:
            for c in CONCURRENCY:
                if n_cells == cells:
                    return n_cells
                cell_id = f"{variant}-c{c}-r{repeat}"
                rows, t_end = [], 0.0
                per_stream = -(-requests // c)
                n = 0
                for s in range(c):
                    t = 1000.0 + s * 1e-3
                    for _ in range(per_stream):
                        if n == requests:
                            break
                        e2e = TOKENS / speed(variant, c) * (1 + 0.05 * rng.standard_normal())
                        ttft = 0.05 * e2e
                        gaps = np.full(TOKENS - 1, (e2e - ttft) / (TOKENS - 1))
                        spec = variant != "baseline"
                        rows.append({
                            "run_id": run_dir.name, "cell_id": cell_id, "engine": "sim",
                            "simulated": True, "concurrency": c, "rate": None, "attempt": 1,
                            "request_id": f"{cell_id}-{n}", "prompt_id": f"p{n % 50}",
                            "domain": "coding" if n % 5 else "agentic", "status": "ok",
                            "error": None, "input_tokens": 200, "output_tokens": TOKENS,
                            "scheduled_at": t, "sent_at": t, "ttft_s": ttft, "e2e_s": e2e,
                            "tpot_s": (e2e - ttft) / (TOKENS - 1), "itl_s": gaps.tolist(),
                            "accept_length": 3.0 if spec else None,
                            "spec_verify_ct": TOKENS // 3 if spec else None,
                            "finish_reason": "length"})
                        t += e2e
                        n += 1
                    t_end = max(t_end, t)
                scrapes = np.arange(1000.0, t_end + 1, 1.0)
                metrics = [{"run_id": run_dir.name, "cell_id": cell_id, "attempt": 1,
                            "scraped_at": float(ts), "metric": name,
                            "labels": json.dumps({"model_name": "sim"}), "value": value}
                           for k, ts in enumerate(scrapes)
                           for name, value in (("sglang:num_running_reqs", float(c)),
                                               ("sglang:num_queue_reqs", 0.0),
                                               ("sglang:token_usage", c / 64),
                                               ("sglang:generation_tokens_total",
                                                float(k * c * speed(variant, c))))]
                tok_s = c * speed(variant, c)
                row = {"run_id": run_dir.name, "cell_id": cell_id, "server_key": variant,
                       "attempt": 1, "status": "done", "error": None, "engine": "sim",
                       "simulated": True, "model": "kimi-k2.5-class", "concurrency": c,
                       "rate": None,
                       "num_requests": requests,
                       "factors": json.dumps({"concurrency": c, "repeat": repeat}),
                       "requests_ok": requests, "requests_error": 0, "error_rate": 0.0,
                       "output_tok_s": tok_s, "accept_length": 3.0 if variant != "baseline"
                       else None, "client_saturated": False,
                       "server_command": f"python -m engines.sim ({variant})"}
                write_cell(run_dir, variant=variant, workload="coding", cell_id=cell_id,
                           attempt=1, requests=rows, cell_row=row, server_metrics=metrics)
                n_cells += 1
        repeat += 1
    return n_cells


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", type=int, default=100)
    p.add_argument("--requests", type=int, default=1000, help="per cell")
    p.add_argument("--repeats", type=int, default=3, help="renders to time")
    p.add_argument("--keep", type=Path, help="keep the generated run here")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="specgrid-bench-"))
    run_dir = (args.keep or root) / "bench-report-run"
    try:
        t0 = time.perf_counter()
        n = make_run(run_dir, args.cells, args.requests)
        size = sum(f.stat().st_size for f in run_dir.rglob("*.parquet"))
        print(f"generated {n} cells x {args.requests} requests through the results writer "
              f"in {time.perf_counter() - t0:.1f} s ({size / 2**20:.0f} MiB of Parquet)")
        renders, phases, cpu = [], [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            data = load_run(run_dir)
            t_analysed = time.perf_counter()
            report = write_report(run_dir, data=data)
            t_done = time.perf_counter()
            renders.append(t_done - t0)
            cpu.append(time.process_time() - c0)
            phases.append((t_analysed - t0, t_done - t_analysed))
        rows = len(data.requests)
        print(f"request rows: {rows}; plots: {len(report.plots)}; "
              f"report.html {report.html.stat().st_size / 2**10:.0f} KiB")
        for (load, draw), total, used in zip(phases, renders, cpu, strict=True):
            print(f"render {total:.2f} s = load+analyse+decide {load:.2f} s + "
                  f"plots+html+json {draw:.2f} s; process CPU {used:.2f} s")
        print(f"median render: {statistics.median(renders):.2f} s wall, "
              f"{statistics.median(cpu):.2f} s CPU (target < 10 s); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
