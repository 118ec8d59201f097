"""Where specgrid's first-chunk (TTFT) error comes from, request by request, in the timing setup
of bench/peer_side_by_side.py (without SGLang's clients).

bench/fixed_schedule_server.py on CPU 0 at ``/sched/20/20`` (first chunk 20 ms after the
request arrived, then one every 20 ms, 64 tokens), the client (``run_load``, uvloop, raw
transport) on CPU 1: ``concurrency`` warm-up requests (``--warmup``), then
``4 x concurrency`` requests arriving Poisson at 90 % of the rate that keeps ``concurrency``
streams busy, capped at ``concurrency`` in flight (``--closed``: closed loop). Server and
client stamps share CLOCK_MONOTONIC (``perf_counter``), so each request's TTFT error (client
TTFT - server TTFT) splits into

* ``delivery``: server received the request - client sent it (the request's way in: loopback
  and the server's loop);
* ``first_chunk_delay``: client stamped the first chunk - server wrote it (the way out: the
  client's loop).

Reported: p50/p99 of |error| per request, the peer script's distribution error (|client
percentile - server percentile|), both parts, and the self-check's verdict.

    python bench/loadgen_ttft_error.py [--concurrency 64 256] [--runs 2] [--warmup N] [--closed]
        [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fixed_schedule_server  # noqa: E402
from peer_side_by_side import (  # noqa: E402
    CLIENT_CPU,
    SERVER_CPU,
    TIMING_REQUEST_S,
    _get,
    _pct,
)

PATH = "/sched/20/20"
TOKENS = 64


def worker(cfg: dict[str, Any]) -> None:
    sys.path.insert(0, cfg["root"])
    import uvloop

    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    conc, warm = cfg["concurrency"], cfg["warmup"]
    n = 4 * conc
    ids = [f"p{i}-{time.time_ns()}" for i in range(n + warm)]
    spec = LoadSpec(url=cfg["url"], prompts=tuple(Prompt(i, i, "bench") for i in ids),
                    concurrency=conc, rate=None if cfg["closed"] else 0.9 * conc / TIMING_REQUEST_S,
                    num_requests=n,
                    warmup_requests=warm, max_new_tokens=TOKENS, transport="raw", seed=1,
                    request_timeout_s=120.0)
    res = uvloop.run(run_load(spec))
    off = res.stats["clock_offset_s"]
    ok = [r for r in res.rows if r["status"] == "ok"]
    Path(cfg["out"]).write_text(json.dumps({
        "rows": [(r["prompt_id"], r["sent_at"] - off, r["ttft_s"], r["scheduled_at"] - off)
                 for r in ok],
        "errors": len(res.rows) - len(ok),
        "saturation": res.stats["saturation_reason"],
        "loop_lag_p99_ms": 1e3 * (res.stats["loop_lag_p99_s"] or 0.0),
        "dispatch_lag_p99_ms": 1e3 * (res.stats["dispatch_lag_p99_s"] or 0.0),
    }))


def run_one(server: str, conc: int, warm: int, closed: bool, root: str, work: Path
            ) -> dict[str, Any]:
    out = work / f"c{conc}-{time.time_ns()}.json"
    cfg = {"url": server + PATH, "concurrency": conc, "warmup": warm, "closed": closed,
           "root": root, "out": str(out)}
    _get(server + "/stamps")  # clear
    proc = subprocess.run(["taskset", "-c", CLIENT_CPU, sys.executable, __file__, "--worker",
                           json.dumps(cfg)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"client failed ({proc.returncode}): {proc.stderr[-3000:]}")
    stamps = _get(server + "/stamps")
    res = json.loads(out.read_text())
    err, delivery, first, c_ttft, s_ttft = [], [], [], [], []
    for pid, sent, ttft, _ in res["rows"]:
        st = stamps.get(pid)
        if st is None or ttft is None:
            continue
        server_ttft = st["sent"][0] - st["recv"]
        c_ttft.append(ttft)
        s_ttft.append(server_ttft)
        err.append(abs(ttft - server_ttft))
        delivery.append(st["recv"] - sent)
        first.append(sent + ttft - st["sent"][0])

    def ms(xs: list[float], q: float) -> float:
        return round(1e3 * _pct(xs, q), 3)

    return {"concurrency": conc, "warmup": warm, "closed_loop": closed, "requests": len(err),
            "errors": res["errors"],
            "ttft_err_p50_ms": ms(err, 50), "ttft_err_p99_ms": ms(err, 99),
            "dist_err_p50_ms": round(1e3 * abs(_pct(c_ttft, 50) - _pct(s_ttft, 50)), 3),
            "dist_err_p99_ms": round(1e3 * abs(_pct(c_ttft, 99) - _pct(s_ttft, 99)), 3),
            "delivery_p50_ms": ms(delivery, 50), "delivery_p99_ms": ms(delivery, 99),
            "first_chunk_delay_p50_ms": ms(first, 50), "first_chunk_delay_p99_ms": ms(first, 99),
            "loop_lag_p99_ms": round(res["loop_lag_p99_ms"], 3),
            "dispatch_lag_p99_ms": round(res["dispatch_lag_p99_ms"], 3),
            "saturation": res["saturation"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--closed", action="store_true",
                    help="closed loop (every stream sends its next request when one ends)")
    ap.add_argument("--warmup", type=int, help="warm-up requests (default: the concurrency, as "
                    "peer_side_by_side.py; the grid's load.warmup_requests default is 2)")
    ap.add_argument("--root", default=str(HERE.parent), help="checkout whose actors/ to import")
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    work = Path(tempfile.mkdtemp(prefix="specgrid-ttft-"))
    srv, server = fixed_schedule_server.launch(int(SERVER_CPU))
    try:
        for _ in range(args.runs):
            for conc in args.concurrency:
                warm = conc if args.warmup is None else args.warmup
                root = str(Path(args.root).resolve())
                print(json.dumps(run_one(server, conc, warm, args.closed, root, work)),
                      flush=True)
    finally:
        srv.terminate()
        srv.wait(timeout=10)


if __name__ == "__main__":
    main()
