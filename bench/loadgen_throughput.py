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
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import fixed_schedule_server  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1

THROUGHPUT = {"requests": 400, "tokens": 256, "concurrency": 64}
TIMING_LEVELS = {1: (8, 2), 64: (128, 3), 256: (512, 4)}  # streams -> (requests, runs)
TIMING_TOKENS = 64


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def _idle_fraction(window_s: float = 2.0) -> float:
    """Share of all CPUs idle over ``window_s`` (from /proc/stat)."""
    def snap() -> tuple[int, int]:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return vals[3] + vals[4], sum(vals)

    i0, t0 = snap()
    time.sleep(window_s)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def _wait_quiet(max_s: float, idle: float = 0.9) -> None:
    """This machine is shared: wait (up to max_s) until other processes leave the CPUs idle."""
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        f = _idle_fraction()
        if f >= idle:
            print(f"machine quiet: {f:.0%} idle")
            return
        print(f"waiting for a quiet machine: {f:.0%} idle", flush=True)
    print("machine still busy: numbers will be noisy")


def jitter_probe(seconds: float = 3.0) -> dict[str, float]:
    """Spin on this CPU reading the clock: gaps between consecutive reads are stalls that no
    program on this machine can avoid (preemption, hypervisor). The floor under any p99."""
    t_end = time.perf_counter() + seconds
    prev = time.perf_counter()
    gaps: list[float] = []
    while True:
        t = time.perf_counter()
        if t - prev > 0.0002:
            gaps.append(t - prev)
        prev = t
        if t > t_end:
            break
    return {"seconds": seconds, "stalls_over_0.2ms": len(gaps),
            "stalls_over_1ms": sum(g > 0.001 for g in gaps),
            "worst_stall_ms": 1e3 * max(gaps, default=0.0)}


def _machine_busy_s() -> float:
    """CPU seconds all CPUs spent busy since boot (from /proc/stat; 0 where unavailable)."""
    try:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return 0.0
    return (sum(vals[:8]) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _prompts(n: int, tag: str) -> list[str]:
    filler = "Summarise the design of a load generator for LLM servers in detail. "
    return [f"[{tag}-{i:05d}] {filler}" for i in range(n)]


def _pct(xs: list[float], q: float) -> float | None:
    from specgrid_metrics.requests import percentile

    return percentile(xs, q)


# --------------------------------------------------------------------------------------------
# worker side (one client run, in its own process)
# --------------------------------------------------------------------------------------------
def _errors(samples: list[tuple[float | None, list[float], str, float]],
            stamps: dict[str, Any]) -> dict[str, Any]:
    """Timing errors of client measurements against the server's stamped schedule.

    samples: (client TTFT, client ITL list, prompt text, client send time as perf_counter).
    Server stamps are perf_counter (CLOCK_MONOTONIC, shared by all processes on Linux), so the
    TTFT error splits into delivery (server recv - client send: loopback + the *server's* loop
    delay) and first-chunk receive delay (client arrival - server write: the client's part)."""
    from specgrid_metrics.requests import itl_gaps

    ttft_err: list[float] = []
    recv_delay: list[float] = []
    delivery: list[float] = []
    itl_err: list[float] = []
    mismatched = 0
    for ttft, itl, text, sent in samples:
        st = stamps.get(text)
        if st is None or ttft is None:
            mismatched += 1
            continue
        ttft_err.append(ttft - (st["sent"][0] - st["recv"]))
        recv_delay.append(sent + ttft - st["sent"][0])
        delivery.append(st["recv"] - sent)
        server_itl = itl_gaps(st["sent"], st["tokens"])
        if len(server_itl) != len(itl):
            mismatched += 1
            continue
        itl_err.extend(c - s for c, s in zip(itl, server_itl, strict=True))

    def ms(xs: list[float], q: float, absolute: bool = True) -> float:
        v = _pct([abs(x) for x in xs] if absolute else xs, q)
        return 1e3 * (v or 0.0)

    return {
        "ttft_err_p50_ms": ms(ttft_err, 50), "ttft_err_p99_ms": ms(ttft_err, 99),
        "itl_err_p50_ms": ms(itl_err, 50), "itl_err_p99_ms": ms(itl_err, 99),
        "first_chunk_delay_p50_ms": ms(recv_delay, 50),
        "first_chunk_delay_p99_ms": ms(recv_delay, 99),
        "delivery_p50_ms": ms(delivery, 50), "delivery_p99_ms": ms(delivery, 99),
        "itl_samples": len(itl_err),
        "unmatched_requests": mismatched,
    }


async def _worker_ours(cfg: dict[str, Any]) -> dict[str, Any]:
    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    n, warm = cfg["requests"], cfg["warmup"]
    texts = _prompts(n + warm, cfg["tag"])
    prompts = tuple(Prompt(f"p{i}", t, "bench") for i, t in enumerate(texts))
    spec = LoadSpec(
        url=cfg["url"], prompts=prompts, concurrency=cfg["concurrency"], num_requests=n,
        warmup_requests=warm, max_new_tokens=cfg["tokens"], transport=cfg["transport"],
        seed=1, request_timeout_s=120.0,
    )
    res = await run_load(spec)
    wall = res.stats["window_end"] - res.stats["window_start"]
    by_id = {p.prompt_id: p.text for p in prompts}
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
    out["_samples"] = [(r["ttft_s"], r["itl_s"], by_id[r["prompt_id"]], r["sent_at"] - off)
                       for r in ok]
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
    import psutil

    _pin(CLIENT_CPU)
    ctx0 = psutil.Process().num_ctx_switches().involuntary
    fn = _worker_ref if cfg["client"] == "ref" else _worker_ours
    if cfg["loop"] == "uvloop":
        import uvloop

        res = uvloop.run(fn(cfg))
    else:
        res = asyncio.run(fn(cfg))
    res["involuntary_ctx_switches"] = psutil.Process().num_ctx_switches().involuntary - ctx0
    stamps = _get(cfg["server"] + "/stamps")
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
    import json as _json
    import timeit

    import fixed_schedule_server as fss

    from actors.loadgen.sinks import NativeSink
    from actors.loadgen.timeline import Timeline

    plan = fss.chunk_plan("microbench", tokens, 3)
    frames = []
    done = 0
    for j, k in enumerate(plan):
        done += k
        frames.append(fss._native_chunk("0", fss.TOKEN * done, done, 16, j == len(plan) - 1,
                                        len(plan), True, False))
    payloads = [f[6:-2] for f in frames]
    n = len(payloads)

    def full() -> None:
        for p in payloads:
            _json.loads(p)["meta_info"]["completion_tokens"]

    from actors.loadgen.sinks import _CT_KEY, _CT_LEN, _INT

    def key_only() -> None:
        for p in payloads:
            int(_INT(p, p.rfind(_CT_KEY) + _CT_LEN).group(1))  # type: ignore[union-attr]

    def fast() -> None:
        sink = NativeSink(Timeline(0.0))
        for f in frames:
            sink.feed(f, 1.0)

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
    import resource

    import psutil

    sp = psutil.Process(server_pid)
    c0 = sum(sp.cpu_times()[:2])
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = _machine_busy_s()
    s0 = sp.num_ctx_switches().involuntary
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(cfg)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    elapsed = time.perf_counter() - t0
    server_cpu = sum(sp.cpu_times()[:2]) - c0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    foreign = _machine_busy_s() - b0 - server_cpu - worker_cpu
    server_preempted = sp.num_ctx_switches().involuntary - s0
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
    res["server_involuntary_ctx_switches"] = server_preempted
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
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
    if args.worker:
        worker(json.loads(args.worker))
        return

    if args.wait_quiet > 0 and os.path.exists("/proc/stat"):
        _wait_quiet(args.wait_quiet)
    _pin(CLIENT_CPU)
    server, base = fixed_schedule_server.launch(SERVER_CPU)
    results: dict[str, Any] = {"throughput": {}, "timing": {}, "cpus": os.cpu_count(),
                               "loadavg_at_start": os.getloadavg()}
    print(f"load average at start: {os.getloadavg()}")
    t_start = time.perf_counter()
    jp = jitter_probe()
    results["jitter"] = jp
    print(f"== platform jitter on the client CPU (spinning {jp['seconds']:g} s): "
          f"{jp['stalls_over_0.2ms']} stalls > 0.2 ms, {jp['stalls_over_1ms']} > 1 ms, worst "
          f"{jp['worst_stall_ms']:.2f} ms")
    mb = parse_microbench()
    results["parse"] = mb
    print(f"== parse: {mb['events_per_request']} events/request (256 tokens), us/event: "
          f"json.loads {mb['json_loads_us_per_event']:.2f}; rfind+regex "
          f"{mb['rfind_regex_us_per_event']:.2f}; whole NativeSink.feed (SSE framing, parse, "
          f"timeline) {mb['sink_us_per_event']:.2f}")
    try:
        tag_n = 0
        if not args.skip_throughput:
            print(f"== throughput: {THROUGHPUT}, zero-delay server, {args.repeats} runs each")
            for rep in range(args.repeats):
                for name, client, transport, loop in VARIANTS:
                    tag_n += 1
                    cfg = {"client": client, "transport": transport, "loop": loop,
                           "mode": "throughput", "url": f"{base}/sched/0/0", "server": base,
                           "requests": THROUGHPUT["requests"], "tokens": THROUGHPUT["tokens"],
                           "concurrency": THROUGHPUT["concurrency"], "warmup": 0,
                           "tag": f"t{tag_n}"}
                    r = _clean_run(cfg, server.pid, args)
                    results["throughput"].setdefault(name, []).append(r)
                    print(f"  [{rep}] {name:40s} {r['wall_s']:6.2f} s {r['tok_s']:9.0f} tok/s "
                          f"{r['chunks_s']:8.0f} chunks/s cpu {r['client_cpu_percent']:3.0f}% "
                          f"({r['client_cpu_us_per_chunk']:.1f} us/chunk) "
                          f"server cpu {r['server_cpu_percent']:3.0f}% "
                          f"preempted {r['involuntary_ctx_switches']} "
                          f"foreign cpu {r['foreign_cpu_percent']:.0f}% "
                          f"ok {r['ok']} err {r['errors']}", flush=True)
        if not args.skip_timing:
            print(f"== timing: TTFT 20 ms, chunk every {args.chunk_ms:g} ms, "
                  f"{TIMING_TOKENS} tokens/request")
            for conc, (n, runs) in TIMING_LEVELS.items():
                for rep in range(runs):
                    for name, client, transport, loop in TIMING_VARIANTS:
                        tag_n += 1
                        cfg = {"client": client, "transport": transport, "loop": loop,
                               "mode": "timing", "url": f"{base}/sched/20/{args.chunk_ms:g}",
                               "server": base, "requests": n, "tokens": TIMING_TOKENS,
                               "concurrency": conc, "warmup": conc if client == "ours" else 0,
                               "tag": f"t{tag_n}"}
                        r = _clean_run(cfg, server.pid, args)
                        results["timing"].setdefault(str(conc), {}).setdefault(name, []).append(r)
                        print(f"  c={conc:3d} [{rep}] {name:38s} TTFT err p50 "
                              f"{r['ttft_err_p50_ms']:6.3f} p99 {r['ttft_err_p99_ms']:6.3f} | "
                              f"1st-chunk delay p99 {r['first_chunk_delay_p99_ms']:6.3f} | "
                              f"ITL err p50 {r['itl_err_p50_ms']:6.3f} p99 "
                              f"{r['itl_err_p99_ms']:6.3f} ms | cpu "
                              f"{r['client_cpu_percent']:3.0f}% preempted client "
                              f"{r['involuntary_ctx_switches']} server "
                              f"{r['server_involuntary_ctx_switches']} foreign cpu "
                              f"{r['foreign_cpu_percent']:.0f}% err {r['errors']}",
                              flush=True)
    finally:
        server.terminate()
        server.wait(10)
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
    main()
