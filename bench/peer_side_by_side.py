"""specgrid's load generator side by side with SGLang's own ``sglang.benchmark.serving`` (its
Python client and its Rust client, ``--rust-client``) against bench/fixed_schedule_server.py.

Setup: the server on CPU 0, every client run its own process on CPU 1, clients alternating in
one sitting (the order reversed every other round). Four modes, each at concurrency 64 and 256:

* **throughput**: ``/sched/0/0`` (no delay: 1-3 tokens per chunk as fast as the server core
  writes them), 2000 requests x 256 output tokens;
* **capped** (throughput per client core): throughput's stream with the client held to
  ``--client-share`` of its core (default 0.1) by a cgroup CPU quota (cpu.max, or cgroup v1
  ``cpu.cfs_quota_us``; needs root) from its first connection to the server on (its start-up
  runs uncapped), 1000 requests: the client is the bottleneck, and ``chunks/s per client
  core`` = chunks/s / the client's CPU share is what one core of that client sustains (why
  throughput mode cannot say it: docs/loadgen.md "Throughput per client core: three regimes");
* **paced**: one event per read for every client (``/sched/0/1`` at 64 streams, ``/sched/0/4``
  at 256: 64k chunks/s, below the server core's limit), 1000 requests x 256 tokens: the cost
  of a read, kernel included;
* **timing**: ``/sched/20/20`` (first chunk 20 ms after the request arrived, then one every
  20 ms), 64 output tokens, 4 requests per stream, Poisson arrivals at 90 % of the rate that
  keeps ``concurrency`` streams busy, capped at ``concurrency`` in flight.

Every figure comes from the server's own stamps (``GET /stamps``, CLOCK_MONOTONIC shared by all
processes) and the client's process CPU (``/proc/<pid>/stat``, all threads, sampled every 20 ms),
so SGLang's clients and specgrid are measured the same way:

* window = first measured request received -> last chunk written (server stamps);
* chunks/s, output tok/s = chunks / tokens the server wrote in the window / window;
* client CPU us/chunk = the client's CPU time inside the window / chunks;
* timing error = |client percentile - server percentile| of TTFT (server: first chunk written
  - request received) and of per-token ITL (server: gaps between chunk writes split over each
  chunk's tokens, SGLang's rule), at p50 and p99. SGLang's result file holds no prompt, so
  requests are compared as distributions, for every client alike.

SGLang's clients run from a separate venv (``--sglang-python``; see docs/loadgen.md for how it
is built), reach the prefixed URL with ``--base-url``, skip the ``/v1/models`` readiness probe
(``--ready-check-timeout-sec 0``) and tokenise with a small local tokenizer written at start.
Event-loop policy: SGLang's Python client runs ``asyncio.run`` (plain asyncio); it is run a
second time with uvloop installed as the policy, and specgrid on both.

specgrid's clients say more of their own (run alone, e.g. ``--clients "specgrid raw"``, they
need no SGLang environment): with ``--count-reads`` their reads are counted (a wrapper around
``H1Connection.data_received``, whose CPU spoils the CPU figures) and ``events_per_read`` is the
run's chunks (warm-up included) over its reads; in timing mode each request's TTFT error is
matched to the server's stamps by prompt and split into ``delivery`` (server received - client
sent: loopback and the server's loop) and ``first_chunk_delay`` (client stamped the first chunk
- server wrote it: the client's loop). ``--root`` runs them from another checkout (``git archive
<commit> | tar -x -C /tmp/before``, built with ``python setup.py build_ext --inplace``) for a
before/after; ``--warmup N`` gives them N warm-up requests instead of one per stream;
``--closed`` runs timing mode closed loop.

    python bench/peer_side_by_side.py --sglang-python .venv-sglang-bench/bin/python \\
        [--rounds 2] [--only throughput capped paced timing] [--client-share 0.1] \\
        [--json out.json]
    python bench/peer_side_by_side.py --clients "specgrid raw (uvloop)" --only throughput \\
        [--count-reads] [--root DIR] [--concurrency 64 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
import psutil
from _common import (
    ROOT,
    SERVER_CPU,
    TIMING_REQUEST_S,
    TOKENIZER,
    CpuSampler,
    client_worker,
    finish_client,
    get_json,
    main_or_worker,
    pct,
    start_client,
    stopping,
    window,
    worker_cmd,
)

from specgrid_metrics.requests import itl_gaps

MODES = {
    "throughput": {"path": "/sched/0/0", "tokens": 256, "requests": {64: 2000, 256: 2000}},
    "capped": {"path": "/sched/0/0", "tokens": 256, "requests": {64: 1000, 256: 1000}},
    "paced": {"path": {64: "/sched/0/1", 256: "/sched/0/4"}, "tokens": 256,
              "requests": {64: 1000, 256: 1000}},
    "timing": {"path": "/sched/20/20", "tokens": 64, "requests": {64: 256, 256: 1024}},
}
CAP_PERIOD_US = 10_000
"""The quota's period: the client runs at most share x 10 ms in every 10 ms."""
CLIENTS = [
    # name, kind, transport / rust flag, event loop
    ("sglang python (asyncio)", "sglang", "", "asyncio"),
    ("sglang python (uvloop)", "sglang", "", "uvloop"),
    ("sglang rust", "sglang", "--rust-client", "tokio"),
    ("specgrid raw (uvloop)", "specgrid", "raw", "uvloop"),
    ("specgrid raw (asyncio)", "specgrid", "raw", "asyncio"),
    ("specgrid aiohttp (uvloop)", "specgrid", "aiohttp", "uvloop"),
    ("specgrid aiohttp (asyncio)", "specgrid", "aiohttp", "asyncio"),
]
SGLANG_UVLOOP = ("import runpy, sys, uvloop; uvloop.install(); sys.argv[0] = 'serving'; "
                 "runpy.run_module('sglang.benchmark.serving', run_name='__main__')")


def _rate(mode: str, conc: int, closed: bool) -> float | None:
    """Timing mode arrives open loop (Poisson) at 90 % of what keeps ``conc`` streams busy, so
    requests do not arrive in one burst (whose queueing in the server would dominate TTFT) and
    the cap rarely binds (``closed``: closed loop); the other modes are closed loop."""
    return 0.9 * conc / TIMING_REQUEST_S if mode == "timing" and not closed else None


def _server_timing(stamps: dict[str, Any]) -> tuple[list[float], list[float]]:
    ttft, itl = [], []
    for s in stamps.values():
        ttft.append(s["sent"][0] - s["recv"])
        itl.extend(itl_gaps(s["sent"], s["tokens"]))
    return ttft, itl


def _sglang_cmd(py: str, flag: str, loop: str, url: str, conc: int, n: int, tokens: int,
                rate: float | None, tok_dir: str, out: Path) -> list[str]:
    head = [py, "-c", SGLANG_UVLOOP] if loop == "uvloop" else [py, "-m", "sglang.benchmark.serving"]
    return [*head, "--backend", "sglang", "--base-url", url, "--model", "m", "--tokenizer",
            tok_dir, "--dataset-name", "random-ids", "--random-input-len", "16",
            "--random-output-len", str(tokens), "--random-range-ratio", "1.0", "--num-prompts",
            str(n), "--max-concurrency", str(conc), "--ready-check-timeout-sec", "0",
            "--output-file", str(out), "--output-details", "--disable-tqdm",
            *(["--request-rate", f"{rate:.3f}"] if rate else []), *([flag] if flag else [])]


class CpuCap:
    """A cgroup that holds its processes (and their later threads) to ``share`` of one CPU."""

    V2, V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")

    def __init__(self, share: float) -> None:
        try:
            self._make(share)
        except OSError as exc:  # not root, or a read-only cgroup file system
            raise SystemExit(f"capped mode cannot make a cgroup: {exc}") from None

    def _make(self, share: float) -> None:
        quota = int(share * CAP_PERIOD_US)
        name = f"specgrid-bench-{os.getpid()}"
        v2 = self.V2 / "cgroup.controllers"
        if v2.exists() and "cpu" in v2.read_text().split():
            self.path = self.V2 / name
            self.path.mkdir()
            (self.path / "cpu.max").write_text(f"{quota} {CAP_PERIOD_US}")
        elif (self.V1 / "cpu.cfs_quota_us").exists():
            self.path = self.V1 / name
            self.path.mkdir()
            (self.path / "cpu.cfs_period_us").write_text(str(CAP_PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            raise SystemExit("capped mode needs a cgroup CPU controller (cpu.max or "
                             "cpu.cfs_quota_us) under /sys/fs/cgroup")

    def add_when_connected(self, pid: int, port: int) -> None:
        """Move process ``pid`` (all its threads) into the cgroup as soon as it has a TCP
        connection to ``port``, i.e. once it starts its warm-up, before the measured window."""
        proc = psutil.Process(pid)
        try:
            while not any(c.raddr and c.raddr.port == port
                          for c in proc.net_connections(kind="tcp")):
                time.sleep(0.005)
            (self.path / "cgroup.procs").write_text(str(pid))
        except (psutil.NoSuchProcess, ProcessLookupError):
            pass

    def remove(self) -> None:
        try:
            self.path.rmdir()  # empty once its processes have exited
        except OSError as exc:  # a client still running (the run failed): say so, go on
            print(f"cgroup {self.path} left behind: {exc}", file=sys.stderr)


def run_one(args: argparse.Namespace, client: tuple[str, str, str, str], mode: str, conc: int,
            server: str, server_pid: int, tok_dir: str, work: Path) -> dict[str, Any]:
    name, kind, flag, loop = client
    m = MODES[mode]
    url = server + (m["path"][conc] if isinstance(m["path"], dict) else m["path"])
    n = m["requests"][conc]
    rate = _rate(mode, conc, args.closed)
    warm = conc if args.warmup is None else args.warmup
    out = work / f"{kind}-{flag or 'py'}-{loop}-{mode}-{conc}-{time.time_ns()}.json"
    cmd = (_sglang_cmd(args.sglang_python, flag, loop, url, conc, n, m["tokens"], rate, tok_dir,
                       out) if kind == "sglang" else
           worker_cmd(__file__, {"url": url, "concurrency": conc, "requests": n, "rate": rate,
                                 "tokens": m["tokens"], "transport": flag, "loop": loop,
                                 "out": str(out), "warmup": warm, "root": args.root,
                                 "count_reads": args.count_reads}))
    get_json(server + "/stamps")  # clear
    proc = start_client(cmd, cwd=work)
    if mode == "capped":  # once it talks to the server: its start-up (imports) runs uncapped
        threading.Thread(target=args.cap.add_when_connected,
                         args=(proc.pid, int(server.rsplit(":", 1)[1])), daemon=True).start()
    client_cpu, server_cpu = CpuSampler(proc.pid), CpuSampler(server_pid)
    finish_client(proc, out, name)
    server_cpu.stopped = True
    stamps = get_json(server + "/stamps")
    own: dict[str, Any] = {}
    if kind == "sglang":
        res = json.loads(out.read_text().splitlines()[-1])
        keep = sorted(stamps, key=lambda p: stamps[p]["recv"])[-len(res["ttfts"]):]  # no warm-up
        errors = sum(1 for e in res["errors"] if e)
    else:  # specgrid's rows: the same fields
        ours = json.loads(out.read_text())
        ok = [r for r in ours["rows"] if r["ok"]]
        res = {"ttfts": [r["ttft_s"] for r in ok], "itls": [r["itl_s"] for r in ok],
               "saturated": ours["stats"]["saturation_reason"]}
        keep = [r["prompt_id"] for r in ok if r["prompt_id"] in stamps]
        errors = len(ours["rows"]) - len(ok)
        own = _own_figures(ours, ok, stamps, mode, n + warm)
    measured = {p: stamps[p] for p in keep}
    start, end, chunks, tokens = window(measured.values())
    window_s = end - start
    c_cpu, c_user = client_cpu.used(start, end)
    s_cpu, _ = server_cpu.used(start, end)
    row: dict[str, Any] = {
        "client": name, "mode": mode, "concurrency": conc, "requests": len(measured),
        "errors": errors, "window_s": window_s, "chunks_s": chunks / window_s,
        "tok_s": tokens / window_s, "client_cpu_percent": 100 * c_cpu / window_s,
        "client_cpu_us_per_chunk": 1e6 * c_cpu / chunks,
        "chunks_s_per_client_core": chunks / c_cpu,
        "client_user_us_per_chunk": 1e6 * c_user / chunks,
        "client_sys_us_per_chunk": 1e6 * (c_cpu - c_user) / chunks,
        "server_cpu_percent": 100 * s_cpu / window_s, "saturated": res.get("saturated"),
        **own,
    }
    s_ttft, s_itl = _server_timing(measured)
    c_ttft = [t for t in res["ttfts"] if t]
    c_itl = [g for lst in res["itls"] for g in lst]
    for q in (50, 99):
        row[f"ttft_err_p{q}_ms"] = 1e3 * abs(pct(c_ttft, q) - pct(s_ttft, q))
        row[f"itl_err_p{q}_ms"] = 1e3 * abs(pct(c_itl, q) - pct(s_itl, q))
    return row


def _own_figures(ours: dict[str, Any], ok: list[dict[str, Any]], stamps: dict[str, Any],
                 mode: str, sent: int) -> dict[str, float]:
    """specgrid's own: events per read (its rows' chunks scaled to the ``sent`` requests the
    reads include, warm-up too), and in timing mode each request's TTFT error and its split."""
    out: dict[str, float] = {}
    if ours["reads"]:
        chunks = sum(r["chunks"] for r in ours["rows"]) * sent / len(ours["rows"])
        out["events_per_read"] = chunks / ours["reads"]
    if mode == "timing":  # by prompt; the stamps share CLOCK_MONOTONIC with the client's
        split: dict[str, list[float]] = {"request_error": [], "delivery": [],
                                         "first_chunk_delay": []}
        for r in ok:
            st = stamps.get(r["prompt_id"])
            if st is not None and r["ttft_s"] is not None:
                split["request_error"].append(abs(r["ttft_s"] - (st["sent"][0] - st["recv"])))
                split["delivery"].append(st["recv"] - r["sent"])
                split["first_chunk_delay"].append(r["sent"] + r["ttft_s"] - st["sent"][0])
        for key, xs in split.items():
            for q in (50, 99):
                out[f"{key}_p{q}_ms"] = 1e3 * pct(xs, q)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sglang-python", default=str(ROOT / ".venv-sglang-bench/bin/python"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", nargs="+", choices=list(MODES), help="modes to run (all by default)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--clients", nargs="+", help="substrings of client names to run")
    ap.add_argument("--client-share", type=float, default=0.1,
                    help="capped mode: the client's CPU quota, a fraction of one core")
    ap.add_argument("--root", default=str(ROOT), help="checkout whose actors/ specgrid imports")
    ap.add_argument("--count-reads", action="store_true",
                    help="count specgrid's reads (costs CPU: not for the CPU figures)")
    ap.add_argument("--warmup", type=int, help="specgrid's warm-up requests (default: one per "
                    "stream; the grid's load.warmup_requests default is 2)")
    ap.add_argument("--closed", action="store_true", help="timing mode closed loop")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.root = str(Path(args.root).resolve())
    modes = args.only or list(MODES)
    args.cap = CpuCap(args.client_share) if "capped" in modes else None
    work = Path(tempfile.mkdtemp(prefix="specgrid-peer-"))
    tok_dir = str(work / "tokenizer")
    clients = [c for c in CLIENTS if not args.clients or any(s in c[0] for s in args.clients)]
    if any(kind == "sglang" for _, kind, _, _ in clients):
        subprocess.run([args.sglang_python, "-c", TOKENIZER, tok_dir], check=True)
    srv, server = fixed_schedule_server.launch(SERVER_CPU)
    rows: list[dict[str, Any]] = []
    try:
        with stopping(srv):
            for rnd in range(args.rounds):
                order = clients if rnd % 2 == 0 else clients[::-1]
                for mode in modes:
                    for conc in args.concurrency:
                        for client in order:
                            row = run_one(args, client, mode, conc, server, srv.pid, tok_dir,
                                          work)
                            row["round"] = rnd
                            rows.append(row)
                            print(json.dumps(row), flush=True)
    finally:
        if args.cap is not None:
            args.cap.remove()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    _report(rows)


def _report(rows: list[dict[str, Any]]) -> None:
    """Median over rounds (and the range of the headline figure) per client, mode, level."""
    keys = sorted({(r["mode"], r["concurrency"]) for r in rows})
    for mode, conc in keys:
        sel = [r for r in rows if r["mode"] == mode and r["concurrency"] == conc]
        # the headline: chunks/s per client core where the client is the limit, else tok/s
        head, key = (("chunks/s per client core", "chunks_s_per_client_core")
                     if mode in ("capped", "paced") else ("output tok/s", "tok_s"))
        print(f"\n{mode}, concurrency {conc}")
        if mode == "timing":
            print("| client | TTFT err p50 / p99 ms | ITL err p50 / p99 ms | client CPU |")
            print("|---|---|---|---|")
        else:
            print(f"| client | {head} (runs) | chunks/s | client CPU | µs/chunk (user + sys) "
                  "| server CPU |\n|---|---|---|---|---|---|")
        for name in dict.fromkeys(r["client"] for r in sel):
            rs = [r for r in sel if r["client"] == name]

            def med(k: str, rs: list[dict[str, Any]] = rs) -> float:
                return pct([r[k] for r in rs], 50)

            if mode == "timing":
                print(f"| {name} | {med('ttft_err_p50_ms'):.2f} / {med('ttft_err_p99_ms'):.2f} "
                      f"| {med('itl_err_p50_ms'):.3f} / {med('itl_err_p99_ms'):.3f} "
                      f"| {med('client_cpu_percent'):.0f}% |")
                continue
            runs = ", ".join(f"{r[key] / 1e3:.0f}k" for r in rs)
            print(f"| {name} | {med(key) / 1e3:.0f}k ({runs}) | {med('chunks_s'):,.0f} "
                  f"| {med('client_cpu_percent'):.0f}% | {med('client_cpu_us_per_chunk'):.1f} "
                  f"({med('client_user_us_per_chunk'):.1f} + "
                  f"{med('client_sys_us_per_chunk'):.1f}) | {med('server_cpu_percent'):.0f}% |")


if __name__ == "__main__":
    main_or_worker(main, client_worker)
