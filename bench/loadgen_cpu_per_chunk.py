"""Client CPU per streamed chunk of specgrid's load generator, measured like
bench/peer_side_by_side.py measures it (without running SGLang's clients).

bench/fixed_schedule_server.py on CPU 0 at ``/sched/0/0`` (no delay: 1-3 tokens per chunk as fast
as the server core writes them), the client in its own process on CPU 1: ``run_load`` with
``concurrency`` warm-up requests, then ``--requests`` x ``--tokens``. Window and chunk count from
the server's stamps (first measured request received -> last chunk written); the client's CPU
in that window from ``/proc/<pid>/stat`` sampled every 20 ms (``CpuSampler``), so the figure is
the one peer_side_by_side.py reports as "client CPU µs/chunk"; its user and system parts are
sampled the same way (``user_us_per_chunk``, ``sys_us_per_chunk``). CPU time, unlike tok/s, does not
depend much on how much of a core the shared machine gave the client.

``--path /sched/0/1`` paces the server instead (a chunk per stream every millisecond): each read
then carries one event whatever the relative speeds, so runs compare more steadily (the
per-read cost); the default is the side-by-side's setting.

``--count-reads`` wraps ``H1Connection.data_received`` to count the client's reads (warm-up
included) and reports ``events_per_read`` (chunks of the whole run / reads): the wrapper costs
CPU, so its CPU figures are not for comparison.

``--root`` picks the checkout whose ``actors/`` the client imports (compare two commits:
``git archive <commit> | tar -x -C /tmp/before`` then ``--root /tmp/before``). ``--profile
out.prof`` runs the client under cProfile (slower; for where the time goes, not for the figure).

    python bench/loadgen_cpu_per_chunk.py [--concurrency 64 256] [--runs 3] [--root DIR]
        [--path /sched/0/0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
from _common import (
    ROOT,
    SERVER_CPU,
    CpuSampler,
    client_worker,
    finish_client,
    get_json,
    main_or_worker,
    start_client,
    stopping,
    window,
    worker_cmd,
)

PATH = "/sched/0/0"


def run_one(server: str, conc: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / f"c{conc}-{time.time_ns()}.json"
    cfg = {"url": server + args.path, "concurrency": conc, "requests": args.requests,
           "tokens": args.tokens, "root": str(Path(args.root).resolve()), "out": str(out),
           "profile": args.profile, "count_reads": args.count_reads}
    get_json(server + "/stamps")  # clear
    proc = start_client(worker_cmd(__file__, cfg))
    cpu = CpuSampler(proc.pid)
    finish_client(proc, out, "client")
    stamps = get_json(server + "/stamps")
    res = json.loads(out.read_text())
    ok = [r["prompt_id"] for r in res["rows"] if r["ok"]]
    measured = [stamps[p] for p in ok if p in stamps]
    start, end, chunks, tokens = window(measured)
    c_cpu, c_user = cpu.used(start, end)
    # the rows are the measured requests; the reads counted include the warm-up's
    events = sum(r["chunks"] for r in res["rows"]) * (args.requests + conc) / args.requests
    return {"concurrency": conc, "requests": len(measured), "errors": len(res["rows"]) - len(ok),
            "chunks": chunks, "tok_s": tokens / (end - start),
            "client_cpu_percent": 100 * c_cpu / (end - start),
            "events_per_read": events / res["reads"] if res["reads"] else None,
            "process_sys_share": res["sys_s"] / (res["user_s"] + res["sys_s"]),
            "us_per_chunk": 1e6 * c_cpu / chunks,
            "user_us_per_chunk": 1e6 * c_user / chunks,
            "sys_us_per_chunk": 1e6 * (c_cpu - c_user) / chunks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--path", default=PATH, help="schedule prefix of the bench server's URL")
    ap.add_argument("--root", default=str(ROOT), help="checkout whose actors/ to import")
    ap.add_argument("--count-reads", action="store_true",
                    help="count the client's reads (costs CPU: not for the CPU figures)")
    ap.add_argument("--profile", help="cProfile the client into this file (one run)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specgrid-cpu-"))
    srv, server = fixed_schedule_server.launch(SERVER_CPU)
    rows: list[dict[str, Any]] = []
    with stopping(srv):
        for _ in range(1 if args.profile else args.runs):
            for conc in args.concurrency:
                rows.append(run_one(server, conc, args, work))
                print(json.dumps(rows[-1]), flush=True)
    for conc in args.concurrency:
        mine = [r for r in rows if r["concurrency"] == conc]
        us = [r["us_per_chunk"] for r in mine]
        print(f"c={conc}: client CPU µs/chunk median {statistics.median(us):.2f} "
              f"(runs {', '.join(f'{u:.2f}' for u in us)}); user median "
              f"{statistics.median(r['user_us_per_chunk'] for r in mine):.2f}, sys median "
              f"{statistics.median(r['sys_us_per_chunk'] for r in mine):.2f}")


if __name__ == "__main__":
    main_or_worker(main, client_worker)
