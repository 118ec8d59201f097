"""Burst dispatch: a closed loop of 64 streams whose responses all end in the same step, as the
simulator ends a batch of equal requests; how soon does each client get its next 64 requests
out? specgrid's load generator and SGLang's Rust client (``sglang-bench``, the compiled
``sglang.srt.rust_extensions._bench`` that SGLang's wheel ships, driven by
``python -m sglang.benchmark.rust_client``) on the same burst.

The server is bench/fixed_schedule_server.py in burst mode (``/burst/<n>``): it holds every
response until ``n`` requests are held, then writes all ``n`` whole responses back to back in
one event-loop turn and stamps the release. A closed-loop client at concurrency ``n`` answers
each release with its next wave of ``n`` requests; the server stamps each one's arrival. So the
figure is measured by the server, the same way for every client:

* **burst dispatch** of a request = its arrival at the server - the last write of the release
  before it (the moment every stream of the wave had its end on the wire); per wave, the last
  request's is the wave's **spread**. Only waves that follow a full release count (the
  warm-up's partial releases and the first wave, which opens connections, do not).

specgrid's own view is reported beside it: ``dispatch_lag`` p50 / p99 from its rows and its
self-check verdict (``client_saturated``, ``saturation_reason``), which must stay clear on a
burst it keeps up with.

Setup: the server on CPU 0, each client in its own process on CPU 1 (``taskset``), the clients
alternating, the order reversed every other round. SGLang's client runs from a Python that has
SGLang installed (``--sglang-python``, default the engine environment ``.venv-engines``) with
a local word-level tokenizer written at start (no download).

    python bench/burst_dispatch.py [--rounds 3] [--waves 40] [--tokens 64] [--concurrency 64]
        [--clients specgrid "sglang rust" "specgrid before"] [--before-root DIR]
        [--sglang-python PY] [--json out.json]

``specgrid before`` is the same client run from another checkout (``--before-root``, built with
``python setup.py build_ext --inplace``), for a before/after comparison in the same sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import fixed_schedule_server  # noqa: E402
from peer_side_by_side import TOKENIZER  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, "1"
CLIENTS = ("specgrid", "sglang rust", "specgrid before")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def worker(cfg: dict[str, Any]) -> None:
    """specgrid's client: ``run_load`` closed loop (uvloop), one warm-up request per stream,
    its rows' dispatch lags and its self-check verdict written to ``out``."""
    sys.path.insert(0, cfg["root"])
    import uvloop

    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    n, conc = cfg["requests"], cfg["concurrency"]
    prompts = tuple(Prompt(f"p{i}", f"p{i}", "bench") for i in range(n + conc))
    spec = LoadSpec(url=cfg["url"], prompts=prompts, concurrency=conc, num_requests=n,
                    warmup_requests=conc, max_new_tokens=cfg["tokens"], seed=1,
                    request_timeout_s=120.0)
    res = uvloop.run(run_load(spec))
    lags = [r["sent_at"] - r["scheduled_at"] for r in res.rows]
    st = res.stats
    Path(cfg["out"]).write_text(json.dumps({
        "errors": sum(1 for r in res.rows if r["status"] != "ok"), "lags": lags,
        "client_dispatch_lag_p99_s": st["client_dispatch_lag_p99_s"],
        "loop_lag_p99_s": st["loop_lag_p99_s"], "client_cpu_percent": st["client_cpu_percent"],
        "client_saturated": st["client_saturated"],
        "saturation_reason": st["saturation_reason"]}))


def _command(client: str, args: argparse.Namespace, url: str, n: int, tok_dir: str,
             out: Path) -> list[str]:
    root = args.before_root if client == "specgrid before" else args.root
    if client.startswith("specgrid"):
        cfg = {"url": url, "concurrency": args.concurrency, "requests": n,
               "tokens": args.tokens, "out": str(out), "root": root}
        return [sys.executable, __file__, "--worker", json.dumps(cfg)]
    return [args.sglang_python, "-m", "sglang.benchmark.rust_client", "--backend", "sglang",
            "--base-url", url, "--model", "m", "--tokenizer", tok_dir,
            "--dataset-name", "random-ids", "--random-input-len", "16",
            "--random-output-len", str(args.tokens), "--random-range-ratio", "1.0",
            "--num-prompts", str(n), "--max-concurrency", str(args.concurrency),
            "--request-rate", "inf", "--warmup-requests", "1", "--ready-check-timeout-sec", "0",
            "--output-file", str(out), "--disable-tqdm"]


def waves(releases: list[dict[str, Any]]) -> list[list[float]]:
    """Per full release followed by a full one: how long after the release's last write each
    request of the next wave (the next release's requests) arrived, sorted. The first release
    answers the warm-up (specgrid: one request per stream; SGLang's client: one request, a
    partial release): the wave after it is the first measured one, which does not count."""
    return [sorted(r - prev["last_write"] for r in nxt["recv"])
            for prev, nxt in zip(releases[1:], releases[2:], strict=False)
            if prev["full"] and nxt["full"]]


def run_one(client: str, args: argparse.Namespace, server: str, tok_dir: str,
            work: Path) -> dict[str, Any]:
    n = args.concurrency * args.waves
    url = f"{server}/sched/0/{args.step_ms:g}/burst/{args.concurrency}"
    out = work / f"{client.replace(' ', '-')}-{time.time_ns()}.json"
    _get(server + "/bursts")  # clear
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = ["taskset", "-c", CLIENT_CPU, *_command(client, args, url, n, tok_dir, out)]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{client} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    releases = _get(server + "/bursts")
    per_wave = waves(releases)
    lags = [x for w in per_wave for x in w]
    row: dict[str, Any] = {
        "client": client, "waves": len(per_wave),
        "burst_p50_ms": 1e3 * _pct(lags, 50), "burst_p99_ms": 1e3 * _pct(lags, 99),
        "spread_p50_ms": 1e3 * _pct([w[-1] for w in per_wave], 50),
        "spread_max_ms": 1e3 * max(w[-1] for w in per_wave),
        "release_ms": 1e3 * _pct([r["last_write"] - r["first_write"] for r in releases
                                  if r["full"]], 50),
    }
    if client.startswith("specgrid"):
        res = json.loads(out.read_text())
        row.update(own_lag_p50_ms=1e3 * _pct(res["lags"], 50),
                   own_lag_p99_ms=1e3 * res["client_dispatch_lag_p99_s"],
                   loop_lag_p99_ms=1e3 * res["loop_lag_p99_s"],
                   cpu_percent=res["client_cpu_percent"], saturated=res["saturation_reason"],
                   errors=res["errors"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--waves", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--clients", nargs="+", default=list(CLIENTS[:2]), choices=CLIENTS)
    ap.add_argument("--sglang-python", default=str(ROOT / ".venv-engines/bin/python"))
    ap.add_argument("--root", default=str(ROOT),
                    help="the source tree specgrid's client runs from (another checkout, built "
                         "with `setup.py build_ext --inplace`, to compare commits)")
    ap.add_argument("--before-root",
                    help="the checkout the client named 'specgrid before' runs from")
    ap.add_argument("--json")
    args = ap.parse_args()
    if "specgrid before" in args.clients and not args.before_root:
        ap.error("the client 'specgrid before' needs --before-root")
    if args.worker:
        worker(json.loads(args.worker))
        return
    server_proc, server = fixed_schedule_server.launch(SERVER_CPU, "--no-record")
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            tok_dir = str(work / "tok")
            if "sglang rust" in args.clients:
                subprocess.run([args.sglang_python, "-c", TOKENIZER, tok_dir], check=True)
            for rnd in range(args.rounds):
                order = args.clients if rnd % 2 == 0 else args.clients[::-1]
                for client in order:
                    row = run_one(client, args, server, tok_dir, work)
                    row["round"] = rnd
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        server_proc.terminate()
        server_proc.wait(timeout=10)
    print(f"\nload average {os.getloadavg()[0]:.2f}; median of {args.rounds} rounds, "
          "runs in brackets (ms)")
    print("| client | burst dispatch p50 | p99 | wave spread p50 | max | specgrid's own "
          "dispatch lag p50 / p99 | flagged |")
    print("|---|---|---|---|---|---|---|")
    for client in args.clients:
        mine = [r for r in rows if r["client"] == client]

        def cell(key: str, rs: list[dict[str, Any]] = mine) -> str:
            xs = [r[key] for r in rs]
            return f"{_pct(xs, 50):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"

        ours = client.startswith("specgrid")
        own = f"{cell('own_lag_p50_ms')} / {cell('own_lag_p99_ms')}" if ours else "-"
        flagged = (str(sum(1 for r in mine if r["saturated"])) + f" of {len(mine)}"
                   if ours else "-")
        print(f"| {client} | {cell('burst_p50_ms')} | {cell('burst_p99_ms')} | "
              f"{cell('spread_p50_ms')} | {cell('spread_max_ms')} | {own} | {flagged} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
