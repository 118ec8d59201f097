"""Benchmark of the load generator itself: one client process against fixed_schedule_server.py.

(1) Throughput: zero-delay server, 400 requests x 256 output tokens, concurrency 64 (the setup of
    the client figures in shared/reference/peers.md): streamed chunks/s and output tok/s.
(2) Timing error: server with TTFT 20 ms then one chunk every ``--chunk-ms`` (20) ms, 1-3 tokens
    per chunk, at 1, 64 and 256 concurrent streams: client-measured TTFT and per-token ITL minus
    the server's own stamped schedule (TTFT_server = first chunk written - request received;
    ITL_server = gaps between chunk writes split over the chunk's tokens), p50/p99 of |error|;
    the TTFT error is split into the client's first-chunk receive delay and delivery.
(0) Context: a platform-jitter probe (spinning on the client CPU) and a parser micro-benchmark.

Clients compared in the same run: specgrid's ``run_load`` with each transport (raw stamping
transport, httpx-aiohttp, httpx default (httpcore)) on asyncio and uvloop, and a reference client
written like SGLang's bench_serving (bench/loadgen_aiohttp_ref.py). Server pinned to CPU 0, each
client run in its own process pinned to CPU 1.

    .venv/bin/python bench/loadgen_throughput.py [--wait-quiet 600] [--json out.json]

The machine may be shared: each measurement is re-run while other processes used more than
``--max-foreign`` % of a CPU during it (see bench/README_loadgen.md for recorded numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
import psutil
from _common import (
    CLIENT_CPU,
    ROOT,
    SERVER_CPU,
    client_spec,
    get_json,
    jitter_probe,
    machine_busy_s,
    main_or_worker,
    pct,
    pin,
    run_on,
    stopping,
    ttft_split,
    wait_quiet,
    worker_cmd,
)
from _stream import chunk_plan, native_event

from specgrid_metrics.requests import itl_gaps

THROUGHPUT = {"requests": 400, "tokens": 256, "concurrency": 64}
TIMING_LEVELS = {1: (8, 2), 64: (128, 3), 256: (512, 4)}  # streams -> (requests, runs)
TIMING_TOKENS = 64


def _prompts(n: int, tag: str) -> list[str]:
    filler = "Summarise the design of a load generator for LLM servers in detail. "
    return [f"[{tag}-{i:05d}] {filler}" for i in range(n)]


# --------------------------------------------------------------------------------------------
# worker side (one client run, in its own process)
# --------------------------------------------------------------------------------------------
def _errors(samples: list[tuple[float | None, list[float], str, float]],
            stamps: dict[str, Any]) -> dict[str, Any]:
    """Timing errors of client measurements against the server's stamped schedule.

    samples: (client TTFT, client ITL list, prompt text, client send time as perf_counter).
    The TTFT error splits into delivery and the client's first-chunk receive delay
    (``_common.ttft_split``)."""
    split = ttft_split(((text, sent, ttft) for ttft, _, text, sent in samples), stamps)
    itl_err: list[float] = []
    mismatched = len(samples) - len(split["error"])
    for ttft, itl, text, _ in samples:
        st = stamps.get(text)
        if st is None or ttft is None:
            continue
        server_itl = itl_gaps(st["sent"], st["tokens"])
        if len(server_itl) != len(itl):
            mismatched += 1
            continue
        itl_err.extend(c - s for c, s in zip(itl, server_itl, strict=True))

    def ms(xs: list[float], q: float) -> float:
        return 1e3 * pct([abs(x) for x in xs], q)

    out = {f"{name}_p{q}_ms": ms(xs, q) for q in (50, 99) for name, xs in (
        ("ttft_err", split["error"]), ("itl_err", itl_err),
        ("first_chunk_delay", split["first_chunk_delay"]), ("delivery", split["delivery"]))}
    return {**out, "itl_samples": len(itl_err), "unmatched_requests": mismatched}


async def _worker_ours(cfg: dict[str, Any]) -> dict[str, Any]:
    from actors.loadgen.runner import run_load

    res = await run_load(client_spec(cfg, _prompts(cfg["requests"] + cfg["warmup"],
                                                    cfg["tag"])))
    wall = res.stats["window_end"] - res.stats["window_start"]
    ok = [r for r in res.rows if r["status"] == "ok"]
    out = {
        "wall_s": wall,
        "ok": len(ok),
        "errors": len(res.rows) - len(ok),
        "first_error": next((r["error"] for r in res.rows if r["error"]), None),
        "output_tokens": sum(r["output_tokens"] or 0 for r in ok),
        "client_cpu_percent": res.stats["client_cpu_percent"],
        "loop_lag_p99_ms": 1e3 * (res.stats["loop_lag_p99_s"] or 0.0),
        "client_saturated": res.stats["client_saturated"],
        "saturation_reason": res.stats["saturation_reason"],
    }
    off = res.stats["clock_offset_s"]
    out["_samples"] = [(r["ttft_s"], r["itl_s"], r["prompt_id"], r["sent_at"] - off) for r in ok]
    return out


async def _worker_ref(cfg: dict[str, Any]) -> dict[str, Any]:
    import loadgen_aiohttp_ref as ref

    texts = _prompts(cfg["requests"], cfg["tag"])
    t_cpu = time.process_time()
    outs, start, end = await ref.run(cfg["url"] + "/generate", texts, cfg["tokens"],
                                     cfg["concurrency"])
    cpu = time.process_time() - t_cpu
    ok = [o for o in outs if o.success]
    return {
        "wall_s": end - start,
        "ok": len(ok),
        "errors": len(outs) - len(ok),
        "first_error": next((o.error for o in outs if o.error), None),
        "output_tokens": sum(o.output_len for o in ok),
        "client_cpu_percent": 100.0 * cpu / (end - start),
        "_samples": [(o.ttft, o.itl, o.prompt, o.start) for o in ok],
    }


def worker(cfg: dict[str, Any]) -> None:
    pin(CLIENT_CPU)
    ctx0 = psutil.Process().num_ctx_switches().involuntary
    res = run_on(cfg["loop"], (_worker_ref if cfg["client"] == "ref" else _worker_ours)(cfg))
    res["involuntary_ctx_switches"] = psutil.Process().num_ctx_switches().involuntary - ctx0
    stamps = get_json(cfg["server"] + "/stamps")
    samples = res.pop("_samples")
    # warmup prompts are in stamps too; count only the measured ones for the chunk rate
    measured = {s[2] for s in samples}
    res["chunks"] = sum(len(stamps[t]["sent"]) for t in measured if t in stamps)
    if cfg["mode"] == "timing":
        res.update(_errors(samples, stamps))
    print("RESULT " + json.dumps(res), flush=True)


# --------------------------------------------------------------------------------------------
# parser micro-benchmark (in-process): is json.loads of cumulative-text events the bottleneck?
# --------------------------------------------------------------------------------------------
def parse_microbench(tokens: int = 256) -> dict[str, float]:
    """µs per event over one request's events (1-3 tokens each, cumulative text), for a full
    ``json.loads`` vs the native parser's fast path (rfind of the key + regex)."""
    import timeit

    from actors.loadgen.sinks import _CT_KEY, _CT_LEN, _INT, NativeSink
    from actors.loadgen.timeline import Timeline

    plan = chunk_plan("microbench", tokens, 3)
    events = [native_event(sum(plan[:j + 1]), 16, j == len(plan) - 1, len(plan), True, False)
              for j in range(len(plan))]
    payloads = [e[6:-2] for e in events]
    n = len(payloads)

    def full() -> None:
        for p in payloads:
            json.loads(p)["meta_info"]["completion_tokens"]

    def key_only() -> None:
        for p in payloads:
            int(_INT(p, p.rfind(_CT_KEY) + _CT_LEN).group(1))  # type: ignore[union-attr]

    def fast() -> None:
        sink = NativeSink(Timeline(0.0))
        for e in events:
            sink.feed(e, 1.0)

    reps = 50
    t_full = min(timeit.repeat(full, number=reps, repeat=3)) / (reps * n) * 1e6
    t_key = min(timeit.repeat(key_only, number=reps, repeat=3)) / (reps * n) * 1e6
    t_fast = min(timeit.repeat(fast, number=reps, repeat=3)) / (reps * n) * 1e6
    return {"events_per_request": n, "json_loads_us_per_event": t_full,
            "rfind_regex_us_per_event": t_key, "sink_us_per_event": t_fast}


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------
VARIANTS = [
    # name, client, transport, loop
    ("specgrid raw+uvloop", "ours", "raw", "uvloop"),
    ("specgrid raw+asyncio", "ours", "raw", "asyncio"),
    ("specgrid aiohttp-transport+uvloop", "ours", "aiohttp", "uvloop"),
    ("specgrid aiohttp-transport+asyncio", "ours", "aiohttp", "asyncio"),
    ("specgrid httpx+asyncio", "ours", "httpx", "asyncio"),
    ("bench_serving-style aiohttp (asyncio)", "ref", "-", "asyncio"),
    ("bench_serving-style aiohttp (uvloop)", "ref", "-", "uvloop"),
]
TIMING_VARIANTS = [v for v in VARIANTS if v[0] in (
    "specgrid raw+uvloop", "specgrid raw+asyncio", "specgrid aiohttp-transport+uvloop",
    "bench_serving-style aiohttp (asyncio)")]


def _run_worker(cfg: dict[str, Any], server_pid: int) -> dict[str, Any]:
    sp = psutil.Process(server_pid)
    c0 = sum(sp.cpu_times()[:2])
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = machine_busy_s()
    s0 = sp.num_ctx_switches().involuntary
    t0 = time.perf_counter()
    proc = subprocess.run(worker_cmd(__file__, cfg), capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    elapsed = time.perf_counter() - t0
    server_cpu = sum(sp.cpu_times()[:2]) - c0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    foreign = machine_busy_s() - b0 - server_cpu - worker_cpu
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"worker failed ({proc.returncode}): {proc.stderr[-2000:]}")
    res = json.loads(line[7:])
    # server CPU over the worker process' life, relative to its load window: an upper bound
    res["server_cpu_s"] = server_cpu
    res["worker_elapsed_s"] = elapsed
    res["tok_s"] = res["output_tokens"] / res["wall_s"]
    res["chunks_s"] = res["chunks"] / res["wall_s"]
    res["server_cpu_percent"] = 100.0 * server_cpu / res["wall_s"]
    res["server_involuntary_ctx_switches"] = sp.num_ctx_switches().involuntary - s0
    # CPU used by anything but this benchmark's two processes while the worker ran (other
    # people's jobs on a shared machine; also kernel network work not billed to a process)
    res["foreign_cpu_percent"] = 100.0 * foreign / elapsed
    # client CPU time per streamed chunk: independent of whether client or server was the limit
    res["client_cpu_us_per_chunk"] = (res["client_cpu_percent"] / 100.0 * res["wall_s"]
                                      / max(1, res["chunks"]) * 1e6)
    return res


def _clean_run(cfg: dict[str, Any], server_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """One worker run; repeated (up to --retries times) while other processes used more than
    --max-foreign % of a CPU meanwhile. The kept run records how many were discarded."""
    discarded = 0
    while True:
        r = _run_worker(cfg, server_pid)
        if r["foreign_cpu_percent"] <= args.max_foreign or discarded >= args.retries:
            r["discarded_runs"] = discarded
            r["contaminated"] = r["foreign_cpu_percent"] > args.max_foreign
            return r
        discarded += 1
        print(f"    (discarded: other processes used {r['foreign_cpu_percent']:.0f}% CPU)",
              flush=True)
        time.sleep(1.0)


def _measure(args: argparse.Namespace, base: str, server_pid: int, results: dict[str, Any]
             ) -> None:
    """The throughput runs, then the timing runs, as the flags ask; each printed as it ends."""
    runs: list[tuple[str, str, int, int, int]] = []  # mode, path, concurrency, requests, tokens
    if not args.skip_throughput:
        print(f"== throughput: {THROUGHPUT}, zero-delay server, {args.repeats} runs each")
        runs += [("throughput", "/sched/0/0", THROUGHPUT["concurrency"], THROUGHPUT["requests"],
                  THROUGHPUT["tokens"])] * args.repeats
    timing = [("timing", f"/sched/20/{args.chunk_ms:g}", conc, n, TIMING_TOKENS)
              for conc, (n, reps) in TIMING_LEVELS.items() for _ in range(reps)]
    for i, (mode, path, conc, n, tokens) in enumerate(runs + ([] if args.skip_timing else timing)):
        if mode == "timing" and i == len(runs):
            print(f"== timing: TTFT 20 ms, chunk every {args.chunk_ms:g} ms, "
                  f"{TIMING_TOKENS} tokens/request")
        for name, client, transport, loop in (VARIANTS if mode == "throughput"
                                              else TIMING_VARIANTS):
            cfg = {"client": client, "transport": transport, "loop": loop, "mode": mode,
                   "url": base + path, "server": base, "requests": n, "tokens": tokens,
                   "concurrency": conc, "tag": f"t{i}-{name}",
                   "warmup": conc if client == "ours" and mode == "timing" else 0}
            r = _clean_run(cfg, server_pid, args)
            if mode == "throughput":
                results["throughput"].setdefault(name, []).append(r)
                print(f"  {name:40s} {r['wall_s']:6.2f} s {r['tok_s']:9.0f} tok/s "
                      f"{r['chunks_s']:8.0f} chunks/s cpu {r['client_cpu_percent']:3.0f}% "
                      f"({r['client_cpu_us_per_chunk']:.1f} us/chunk) "
                      f"server cpu {r['server_cpu_percent']:3.0f}% "
                      f"preempted {r['involuntary_ctx_switches']} "
                      f"foreign cpu {r['foreign_cpu_percent']:.0f}% "
                      f"ok {r['ok']} err {r['errors']}", flush=True)
                continue
            results["timing"].setdefault(str(conc), {}).setdefault(name, []).append(r)
            print(f"  c={conc:3d} {name:38s} TTFT err p50 {r['ttft_err_p50_ms']:6.3f} p99 "
                  f"{r['ttft_err_p99_ms']:6.3f} | 1st-chunk delay p99 "
                  f"{r['first_chunk_delay_p99_ms']:6.3f} | ITL err p50 {r['itl_err_p50_ms']:6.3f} "
                  f"p99 {r['itl_err_p99_ms']:6.3f} ms | cpu {r['client_cpu_percent']:3.0f}% "
                  f"preempted client {r['involuntary_ctx_switches']} server "
                  f"{r['server_involuntary_ctx_switches']} foreign cpu "
                  f"{r['foreign_cpu_percent']:.0f}% err {r['errors']}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="throughput runs per variant")
    ap.add_argument("--chunk-ms", type=float, default=20.0, help="server chunk interval (timing)")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--max-foreign", type=float, default=15.0, metavar="PCT",
                    help="rerun a measurement when other processes used more CPU than this")
    ap.add_argument("--retries", type=int, default=2, help="reruns per measurement at most")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="first wait up to S seconds for the CPUs to be >= 90%% idle")
    args = ap.parse_args()
    if args.wait_quiet > 0 and os.path.exists("/proc/stat"):
        wait_quiet(args.wait_quiet)
    pin(CLIENT_CPU)
    server, base = fixed_schedule_server.launch(SERVER_CPU)
    results: dict[str, Any] = {"throughput": {}, "timing": {}, "cpus": os.cpu_count(),
                               "loadavg_at_start": os.getloadavg()}
    print(f"load average at start: {os.getloadavg()}")
    t_start = time.perf_counter()
    jp = results["jitter"] = jitter_probe()
    print(f"== platform jitter on the client CPU (spinning {jp['seconds']:g} s): "
          f"{jp['stalls_over_0.2ms']} stalls > 0.2 ms, {jp['stalls_over_1ms']} > 1 ms, worst "
          f"{jp['worst_stall_ms']:.2f} ms")
    mb = results["parse"] = parse_microbench()
    print(f"== parse: {mb['events_per_request']} events/request (256 tokens), us/event: "
          f"json.loads {mb['json_loads_us_per_event']:.2f}; rfind+regex "
          f"{mb['rfind_regex_us_per_event']:.2f}; whole NativeSink.feed (SSE framing, parse, "
          f"timeline) {mb['sink_us_per_event']:.2f}")
    with stopping(server):
        _measure(args, base, server.pid, results)
    results["bench_wall_s"] = time.perf_counter() - t_start
    _report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def _runs_note(runs: list[dict[str, Any]]) -> str:
    bad = sum(1 for r in runs if r.get("contaminated"))
    return f"{len(runs)}" + (f" ({bad} noisy)" if bad else "")


def _report(results: dict[str, Any]) -> None:
    thr = results["throughput"]
    if thr:
        ref_name = "bench_serving-style aiohttp (asyncio)"
        ref_tok = statistics.median(r["tok_s"] for r in thr[ref_name]) if ref_name in thr else None
        print("\n| client | runs | wall s | output tok/s (min-max) | chunks/s | client CPU | "
              "client CPU us/chunk | tok/s vs bench_serving-style |")
        print("|---|---|---|---|---|---|---|---|")
        for name, runs in thr.items():
            tok = [r["tok_s"] for r in runs]
            med = statistics.median(tok)
            ratio = f"{med / ref_tok:.2f}x" if ref_tok else "-"
            print(f"| {name} | {_runs_note(runs)} | "
                  f"{statistics.median(r['wall_s'] for r in runs):.2f} | "
                  f"{med:,.0f} ({min(tok):,.0f}-{max(tok):,.0f}) | "
                  f"{statistics.median(r['chunks_s'] for r in runs):,.0f} | "
                  f"{statistics.median(r['client_cpu_percent'] for r in runs):.0f}% | "
                  f"{statistics.median(r['client_cpu_us_per_chunk'] for r in runs):.1f} | "
                  f"{ratio} |")
    tim = results["timing"]
    if tim:
        print("\nmedians over runs of |client - server| percentiles, ms")
        print("| streams | client | runs | TTFT err p50 / p99 | of which 1st-chunk receive "
              "p50 / p99 | ITL err p50 / p99 | client CPU |")
        print("|---|---|---|---|---|---|---|")
        for conc, by in tim.items():
            for name, runs in by.items():
                def med(key: str, rs: list[dict[str, Any]] = runs) -> float:
                    return statistics.median(r[key] for r in rs)

                print(f"| {conc} | {name} | {_runs_note(runs)} | {med('ttft_err_p50_ms'):.3f} / "
                      f"{med('ttft_err_p99_ms'):.3f} | {med('first_chunk_delay_p50_ms'):.3f} / "
                      f"{med('first_chunk_delay_p99_ms'):.3f} | {med('itl_err_p50_ms'):.3f} / "
                      f"{med('itl_err_p99_ms'):.3f} | {med('client_cpu_percent'):.0f}% |")
    print(f"\nbench wall time {results['bench_wall_s']:.0f} s")


if __name__ == "__main__":
    main_or_worker(main, worker)
