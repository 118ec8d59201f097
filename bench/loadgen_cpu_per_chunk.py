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
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fixed_schedule_server  # noqa: E402
from peer_side_by_side import CLIENT_CPU, SERVER_CPU, CpuSampler, _get  # noqa: E402

PATH = "/sched/0/0"


def worker(cfg: dict[str, Any]) -> None:
    """The client: ``run_load`` on uvloop; writes its measured prompts' ids to ``out``."""
    sys.path.insert(0, cfg["root"])
    import uvloop

    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    reads = [0]
    if cfg.get("count_reads"):
        from actors.loadgen import h1

        received = h1.H1Connection.data_received

        def counted(self: h1.H1Connection, data: bytes) -> None:
            reads[0] += 1
            received(self, data)

        h1.H1Connection.data_received = counted  # type: ignore[method-assign]
    n, warm = cfg["requests"], cfg["concurrency"]
    ids = [f"p{i}-{time.time_ns()}" for i in range(n + warm)]
    spec = LoadSpec(url=cfg["url"], prompts=tuple(Prompt(i, i, "bench") for i in ids),
                    concurrency=cfg["concurrency"], num_requests=n, warmup_requests=warm,
                    max_new_tokens=cfg["tokens"], transport="raw", seed=1,
                    request_timeout_s=120.0)
    if cfg.get("profile"):
        import cProfile

        prof = cProfile.Profile()
        res = prof.runcall(uvloop.run, run_load(spec))
        prof.dump_stats(cfg["profile"])
    else:
        res = uvloop.run(run_load(spec))
    ok = [r["prompt_id"] for r in res.rows if r["status"] == "ok"]
    use = resource.getrusage(resource.RUSAGE_SELF)
    chunks = sum(len(r["chunk_tokens"] or ()) for r in res.rows) * (n + warm) / n
    Path(cfg["out"]).write_text(json.dumps({"prompts": ok, "errors": len(res.rows) - len(ok),
                                            "events_per_read": chunks / reads[0] if reads[0]
                                            else None,
                                            "user_s": use.ru_utime, "sys_s": use.ru_stime}))


def run_one(server: str, server_pid: int, conc: int, args: argparse.Namespace,
            work: Path) -> dict[str, Any]:
    out = work / f"c{conc}-{time.time_ns()}.json"
    cfg = {"url": server + args.path, "concurrency": conc, "requests": args.requests,
           "tokens": args.tokens, "root": str(Path(args.root).resolve()), "out": str(out),
           "profile": args.profile, "count_reads": args.count_reads}
    _get(server + "/stamps")  # clear
    proc = subprocess.Popen(["taskset", "-c", CLIENT_CPU, sys.executable, __file__, "--worker",
                             json.dumps(cfg)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    cpu = CpuSampler(proc.pid)
    cpu.start()
    log, _ = proc.communicate(timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"client failed ({proc.returncode}): {log[-3000:]}")
    stamps = _get(server + "/stamps")
    res = json.loads(out.read_text())
    measured = [stamps[p] for p in res["prompts"] if p in stamps]
    start = min(s["recv"] for s in measured)
    end = max(s["sent"][-1] for s in measured)
    chunks = sum(len(s["sent"]) for s in measured)
    tokens = sum(sum(s["tokens"]) for s in measured)
    c_cpu = cpu.at(end) - cpu.at(start)
    c_user = cpu.at(end, user=True) - cpu.at(start, user=True)
    return {"concurrency": conc, "requests": len(measured), "errors": res["errors"],
            "chunks": chunks, "tok_s": tokens / (end - start),
            "client_cpu_percent": 100 * c_cpu / (end - start),
            "events_per_read": res["events_per_read"],
            "process_sys_share": res["sys_s"] / (res["user_s"] + res["sys_s"]),
            "us_per_chunk": 1e6 * c_cpu / chunks,
            "user_us_per_chunk": 1e6 * c_user / chunks,
            "sys_us_per_chunk": 1e6 * (c_cpu - c_user) / chunks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--path", default=PATH, help="schedule prefix of the bench server's URL")
    ap.add_argument("--root", default=str(HERE.parent), help="checkout whose actors/ to import")
    ap.add_argument("--count-reads", action="store_true",
                    help="count the client's reads (costs CPU: not for the CPU figures)")
    ap.add_argument("--profile", help="cProfile the client into this file (one run)")
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    work = Path(tempfile.mkdtemp(prefix="specgrid-cpu-"))
    srv, server = fixed_schedule_server.launch(int(SERVER_CPU))
    rows: list[dict[str, Any]] = []
    try:
        for _ in range(1 if args.profile else args.runs):
            for conc in args.concurrency:
                row = run_one(server, srv.pid, conc, args, work)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    for conc in args.concurrency:
        mine = [r for r in rows if r["concurrency"] == conc]
        us = [r["us_per_chunk"] for r in mine]
        print(f"c={conc}: client CPU µs/chunk median {statistics.median(us):.2f} "
              f"(runs {', '.join(f'{u:.2f}' for u in us)}); user median "
              f"{statistics.median(r['user_us_per_chunk'] for r in mine):.2f}, sys median "
              f"{statistics.median(r['sys_us_per_chunk'] for r in mine):.2f}")


if __name__ == "__main__":
    main()
