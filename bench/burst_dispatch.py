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

specgrid's own view is reported beside it, from its rows, the same way for every commit: the
dispatch lag (sent - due) of the requests after the first wave, p50 / p99 / max, the first
wave's longest, and how many runs its self-check flagged (``saturation_reason`` in the JSON
lines): it must stay clear on a burst it keeps up with.

``--against-sim``: specgrid's clients (no peer: the simulator stamps nothing for it) against
the simulator (engines/sim, the default sweep's model and hardware, on CPU 0) in the shape of
the default sweep's c=64 cell: ``--waves 4 --tokens 96`` (4 requests per stream, 96 output
tokens, 2 warm-up requests). The simulator ends up to 64 streams in one step.

Setup: the server on CPU 0, each client in its own process on CPU 1 (``taskset``), the clients
alternating, the order reversed every other round. SGLang's client runs from a Python that has
SGLang installed (``--sglang-python``, default the engine environment ``.venv-engines``) with
a local word-level tokenizer written at start (no download).

    python bench/burst_dispatch.py [--rounds 3] [--waves 40] [--tokens 64] [--concurrency 64]
        [--clients specgrid "sglang rust" "specgrid before"] [--before-root DIR]
        [--sglang-python PY] [--json out.json]
    python bench/burst_dispatch.py --against-sim --waves 4 --tokens 96
        --clients specgrid "specgrid before" --before-root DIR

``specgrid before`` is the same client run from another checkout (``--before-root``, built with
``python setup.py build_ext --inplace``), for a before/after comparison in the same sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
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
SIM_WARMUP = 2
"""Warm-up requests against the simulator: the default sweep's ``load.warmup_requests``."""


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
    """specgrid's client: ``run_load`` closed loop (uvloop), one warm-up request per stream
    (against the simulator: ``SIM_WARMUP``), its rows' due and send times and its self-check
    written to ``out``."""
    sys.path.insert(0, cfg["root"])
    import uvloop

    from actors.loadgen.runner import run_load
    from actors.loadgen.spec import LoadSpec, Prompt

    n, conc, warm = cfg["requests"], cfg["concurrency"], cfg["warmup"]
    # distinct prompts (the burst server's stamps); against the simulator, code-like ones
    text = (lambda i: f"def f{i}(x):\n    return x * {i}\n" * 20) if cfg["sim"] else str
    prompts = tuple(Prompt(f"p{i}", text(i), "coding") for i in range(n + warm))
    spec = LoadSpec(url=cfg["url"], prompts=prompts, concurrency=conc, num_requests=n,
                    warmup_requests=warm, max_new_tokens=cfg["tokens"], seed=1,
                    request_timeout_s=300.0)
    res = uvloop.run(run_load(spec))
    st = res.stats
    Path(cfg["out"]).write_text(json.dumps({
        "errors": sum(1 for r in res.rows if r["status"] != "ok"),
        "due_sent": [(r["scheduled_at"], r["sent_at"]) for r in res.rows],
        "client_dispatch_lag_p99_s": st["client_dispatch_lag_p99_s"],
        "loop_lag_p99_s": st["loop_lag_p99_s"], "client_cpu_percent": st["client_cpu_percent"],
        "client_saturated": st["client_saturated"],
        "saturation_reason": st["saturation_reason"]}))


def _command(client: str, args: argparse.Namespace, url: str, n: int, tok_dir: str,
             out: Path) -> list[str]:
    root = args.before_root if client == "specgrid before" else args.root
    if client.startswith("specgrid"):
        cfg = {"url": url, "concurrency": args.concurrency, "requests": n,
               "tokens": args.tokens, "out": str(out), "root": root, "sim": args.against_sim,
               "warmup": SIM_WARMUP if args.against_sim else args.concurrency}
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


def own_view(res: dict[str, Any], conc: int) -> dict[str, Any]:
    """specgrid's own figures from its rows, the same for every commit: the dispatch lag
    (sent - due) of the requests after the first wave (the first ``conc`` due), and of the first
    wave; its stall p99 and self-check as its stats give them."""
    pairs = sorted(res["due_sent"])
    after = [b - a for a, b in pairs[conc:]]
    first = [b - a for a, b in pairs[:conc]]
    return {"lag_p50_ms": 1e3 * _pct(after, 50), "lag_p99_ms": 1e3 * _pct(after, 99),
            "lag_max_ms": 1e3 * max(after), "first_wave_max_ms": 1e3 * max(first),
            "loop_lag_p99_ms": 1e3 * res["loop_lag_p99_s"],
            "cpu_percent": res["client_cpu_percent"], "saturated": res["saturation_reason"],
            "errors": res["errors"]}


def run_one(client: str, args: argparse.Namespace, server: str, tok_dir: str,
            work: Path) -> dict[str, Any]:
    n = args.concurrency * args.waves
    url = (server if args.against_sim
           else f"{server}/sched/0/{args.step_ms:g}/burst/{args.concurrency}")
    out = work / f"{client.replace(' ', '-')}-{time.time_ns()}.json"
    if not args.against_sim:
        _get(server + "/bursts")  # clear
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = ["taskset", "-c", CLIENT_CPU, *_command(client, args, url, n, tok_dir, out)]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{client} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    row: dict[str, Any] = {"client": client}
    if client.startswith("specgrid"):
        row.update(own_view(json.loads(out.read_text()), args.concurrency))
    if args.against_sim:
        return row
    releases = _get(server + "/bursts")
    per_wave = waves(releases)
    lags = [x for w in per_wave for x in w]
    row.update({
        "waves": len(per_wave),
        "burst_p50_ms": 1e3 * _pct(lags, 50), "burst_p99_ms": 1e3 * _pct(lags, 99),
        "spread_p50_ms": 1e3 * _pct([w[-1] for w in per_wave], 50),
        "spread_max_ms": 1e3 * max(w[-1] for w in per_wave),
        "release_ms": 1e3 * _pct([r["last_write"] - r["first_write"] for r in releases
                                  if r["full"]], 50),
    })
    return row


def launch_sim(python: str) -> tuple[subprocess.Popen[str], str]:
    """The simulator (engines/sim) with the default sweep's model and hardware, on CPU 0, on a
    free port; returns the process and its URL once /health answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        ["taskset", "-c", str(SERVER_CPU), python, "-m", "engines.sim",
         "--model-path", "specgrid/sim-model", "--served-model-name", "sim-model",
         "--host", "127.0.0.1", "--port", str(port), "--sim-model", "kimi-k2.5-class",
         "--sim-hardware", "rtx-pro-6000", "--sim-seed", "0"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("the simulator did not answer /health within 120 s")


def _table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    print(f"\nload average {os.getloadavg()[0]:.2f}; median of {args.rounds} rounds, "
          "runs in brackets (ms)")

    def cell(mine: list[dict[str, Any]], key: str) -> str:
        xs = [r[key] for r in mine]
        return f"{_pct(xs, 50):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"

    if not args.against_sim:
        print("| client | burst dispatch p50 | p99 | wave spread p50 | max |")
        print("|---|---|---|---|---|")
        for client in args.clients:
            mine = [r for r in rows if r["client"] == client]
            print(f"| {client} | {cell(mine, 'burst_p50_ms')} | {cell(mine, 'burst_p99_ms')} | "
                  f"{cell(mine, 'spread_p50_ms')} | {cell(mine, 'spread_max_ms')} |")
    print("\n| client (own rows) | dispatch lag after the first wave p50 | p99 | max | "
          "first wave max | flagged (runs) |")
    print("|---|---|---|---|---|---|")
    for client in [c for c in args.clients if c.startswith("specgrid")]:
        mine = [r for r in rows if r["client"] == client]
        print(f"| {client} | {cell(mine, 'lag_p50_ms')} | {cell(mine, 'lag_p99_ms')} | "
              f"{cell(mine, 'lag_max_ms')} | {cell(mine, 'first_wave_max_ms')} | "
              f"{sum(1 for r in mine if r['saturated'])} of {len(mine)} |")


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
    ap.add_argument("--against-sim", action="store_true",
                    help="specgrid's clients against the simulator instead (no server stamps)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    if "specgrid before" in args.clients and not args.before_root:
        ap.error("the client 'specgrid before' needs --before-root")
    if args.against_sim and "sglang rust" in args.clients:
        ap.error("--against-sim runs specgrid's clients only (it has no server stamps)")
    server_proc, server = (launch_sim(sys.executable) if args.against_sim
                           else fixed_schedule_server.launch(SERVER_CPU, "--no-record"))
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
    _table(args, rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
