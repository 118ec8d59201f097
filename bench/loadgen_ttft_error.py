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
import tempfile
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
from _common import (
    ROOT,
    SERVER_CPU,
    TIMING_REQUEST_S,
    client_worker,
    finish_client,
    get_json,
    main_or_worker,
    pct,
    start_client,
    stopping,
    ttft_split,
    worker_cmd,
)

PATH = "/sched/20/20"
TOKENS = 64


def run_one(server: str, conc: int, warm: int, closed: bool, root: str, work: Path
            ) -> dict[str, Any]:
    out = work / f"c{conc}-{time.time_ns()}.json"
    cfg = {"url": server + PATH, "concurrency": conc, "requests": 4 * conc, "warmup": warm,
           "rate": None if closed else 0.9 * conc / TIMING_REQUEST_S, "tokens": TOKENS,
           "root": root, "out": str(out)}
    get_json(server + "/stamps")  # clear
    finish_client(start_client(worker_cmd(__file__, cfg)), out, "client")
    stamps = get_json(server + "/stamps")
    res = json.loads(out.read_text())
    st = res["stats"]
    split = ttft_split([(r["prompt_id"], r["sent"], r["ttft_s"]) for r in res["rows"] if r["ok"]],
                       stamps)
    err = [abs(e) for e in split["error"]]

    def ms(xs: list[float], q: float) -> float:
        return round(1e3 * pct(xs, q), 3)

    return {"concurrency": conc, "warmup": warm, "closed_loop": closed, "requests": len(err),
            "errors": sum(1 for r in res["rows"] if not r["ok"]),
            "ttft_err_p50_ms": ms(err, 50), "ttft_err_p99_ms": ms(err, 99),
            **{f"dist_err_p{q}_ms": round(1e3 * abs(pct(split["client"], q)
                                                    - pct(split["server"], q)), 3)
               for q in (50, 99)},
            "delivery_p50_ms": ms(split["delivery"], 50),
            "delivery_p99_ms": ms(split["delivery"], 99),
            "first_chunk_delay_p50_ms": ms(split["first_chunk_delay"], 50),
            "first_chunk_delay_p99_ms": ms(split["first_chunk_delay"], 99),
            "loop_lag_p99_ms": round(1e3 * (st["loop_lag_p99_s"] or 0.0), 3),
            "dispatch_lag_p99_ms": round(1e3 * (st["dispatch_lag_p99_s"] or 0.0), 3),
            "saturation": st["saturation_reason"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--closed", action="store_true",
                    help="closed loop (every stream sends its next request when one ends)")
    ap.add_argument("--warmup", type=int, help="warm-up requests (default: the concurrency, as "
                    "peer_side_by_side.py; the grid's load.warmup_requests default is 2)")
    ap.add_argument("--root", default=str(ROOT), help="checkout whose actors/ to import")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specgrid-ttft-"))
    srv, server = fixed_schedule_server.launch(SERVER_CPU)
    with stopping(srv):
        for _ in range(args.runs):
            for conc in args.concurrency:
                warm = conc if args.warmup is None else args.warmup
                root = str(Path(args.root).resolve())
                print(json.dumps(run_one(server, conc, warm, args.closed, root, work)),
                      flush=True)


if __name__ == "__main__":
    main_or_worker(main, client_worker)
