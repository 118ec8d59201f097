"""What the load generator's mid-cell checks (precision target, over-saturation;
actors/loadgen/stopping.py) cost the client: the same cell with and without them, against one
simulator process (default profile, modelled time, SIMULATION), alternating, `--rounds` times.

"with" runs a target that is never reached (±0.01 %), so the checks run until the cell's
count, plus the over-saturation check; "without" runs neither (no watch at all). Reported per
run: the event loop's latency p50 / p99 (the self-check's probe), the event-loop thread's CPU
over the steady window, the dispatch lag p99 the self-check judges, the process's CPU per
request (both threads), and for "with" the checks made, their CPU in all and the longest.

    python bench/precision_check_cost.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import resource
from collections.abc import Sequence
from statistics import median

from _common import ROOT, launch_sim, stopping

from actors.loadgen.runner import run_load_sync
from actors.loadgen.spec import LoadSpec, Prompt
from specgrid_metrics.precision import parse_targets

UNREACHABLE = parse_targets({"metric": "output_tok_s", "half_width": 0.0001})


def prompts() -> tuple[Prompt, ...]:
    rows = [json.loads(line) for line in
            (ROOT / "workloads" / "prompts" / "coding.jsonl").read_text().splitlines() if line]
    return tuple(Prompt(r["prompt_id"], r["text"], r.get("domain", "coding")) for r in rows)


def one(url: str, concurrency: int, requests: int, checks: bool) -> dict[str, float]:
    spec = LoadSpec(url=url, prompts=prompts(), concurrency=concurrency, num_requests=requests,
                    warmup_requests=2, max_new_tokens=96,
                    targets=UNREACHABLE if checks else (), min_requests=8,
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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/precision_check_cost.py")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--per-stream", type=int, default=6)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ns = ap.parse_args(argv)
    server, url = launch_sim(["--sim-time-scale", str(ns.time_scale),
                              "--max-running-requests", "64"])
    with stopping(server):
        one(url, 4, 8, False)  # the server's first requests, not measured
        print("| c | requests | checks | loop latency p50 / p99 ms | loop thread CPU % | "
              "dispatch lag p99 ms | process CPU ms per request | checks made, CPU s, "
              "longest ms |")
        print("|---|---|---|---|---|---|---|---|")
        for c in ns.concurrency:
            n = ns.per_stream * c
            runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for r in range(ns.rounds):
                for checks in ((False, True) if r % 2 == 0 else (True, False)):
                    runs[checks].append(one(url, c, n, checks))
            for checks in (False, True):
                rs = runs[checks]

                def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                    return median(x[key] for x in rs)

                each = ", ".join(f"{x['loop_p99_ms']:.3f}" for x in rs)
                made = (f"{med('checks'):.0f}, {med('check_cpu_s'):.2f}, "
                        f"{med('check_max_ms'):.1f}" if checks else "-")
                print(f"| {c} | {n} | {'with' if checks else 'without'} | "
                      f"{med('loop_p50_ms'):.3f} / {med('loop_p99_ms'):.3f} "
                      f"({each}) | "
                      f"{med('loop_cpu_pct'):.1f} | {med('dispatch_p99_ms'):.2f} | "
                      f"{med('cpu_ms_per_request'):.2f} | {made} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
