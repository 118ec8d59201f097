"""Burst dispatch: a closed loop of 64 streams whose responses all end in the same step, as the
simulator ends a batch of equal requests; how soon does each client get its next 64 requests
out? specgrid's load generator and SGLang's Rust client (``python -m
sglang.benchmark.rust_client``, the compiled ``sglang-bench`` that SGLang's wheel ships) on the
same burst, measured by bench/fixed_schedule_server.py in burst mode (``/burst/<n>``), the
same way for every client: the **burst dispatch** of a request = its arrival at the server -
the last write of the release before it; a wave's **spread** = its last request's. Only waves
after a full release count (not the warm-up's, not the first wave, which opens connections).
Beside it, specgrid's own view from its rows, the same for every commit: the dispatch lag
(sent - due) after the first wave, the first wave's longest, and the runs its self-check
flagged. What each figure means, the setup and the recorded numbers: bench/README.md "Burst
dispatch".

``--against-sim``: specgrid's clients (the simulator stamps nothing for a peer) against the
simulator (the default sweep's model and hardware, on CPU 0) in the shape of the default
sweep's c=64 cell: ``--waves 4 --tokens 96``, 2 warm-up requests.

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
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
from _common import (
    ROOT,
    SERVER_CPU,
    TOKENIZER,
    client_worker,
    finish_client,
    get_json,
    launch_sim,
    main_or_worker,
    pct,
    start_client,
    stopping,
    worker_cmd,
)

CLIENTS = ("specgrid", "sglang rust", "specgrid before")
SIM_WARMUP = 2
"""Warm-up requests against the simulator: the default sweep's ``load.warmup_requests``."""
SIM = ["--model-path", "specgrid/sim-model", "--served-model-name", "sim-model", "--sim-model",
       "kimi-k2.5-class", "--sim-hardware", "rtx-pro-6000", "--sim-seed", "0"]
"""The simulator as the default sweep runs it: its model and hardware."""


def _command(client: str, args: argparse.Namespace, url: str, n: int, tok_dir: str,
             out: Path) -> list[str]:
    root = args.before_root if client == "specgrid before" else str(ROOT)
    if client.startswith("specgrid"):
        return worker_cmd(__file__, {
            "url": url, "concurrency": args.concurrency, "requests": n, "tokens": args.tokens,
            "out": str(out), "root": root, "code": args.against_sim, "timeout_s": 300.0,
            "warmup": SIM_WARMUP if args.against_sim else args.concurrency})
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
    """specgrid's own figures from its rows (``_common.client_worker``), the same for every
    commit: the dispatch lag (sent - due) of the requests after the first wave (the first
    ``conc`` due), and of the first wave; its stall p99 and self-check as its stats give
    them."""
    pairs = sorted((r["due"], r["sent"]) for r in res["rows"])
    after = [b - a for a, b in pairs[conc:]]
    first = [b - a for a, b in pairs[:conc]]
    st = res["stats"]
    return {"lag_p50_ms": 1e3 * pct(after, 50), "lag_p99_ms": 1e3 * pct(after, 99),
            "lag_max_ms": 1e3 * max(after), "first_wave_max_ms": 1e3 * max(first),
            "loop_lag_p99_ms": 1e3 * st["loop_lag_p99_s"],
            "cpu_percent": st["client_cpu_percent"], "saturated": st["saturation_reason"],
            "errors": sum(1 for r in res["rows"] if not r["ok"])}


def run_one(client: str, args: argparse.Namespace, server: str, tok_dir: str,
            work: Path) -> dict[str, Any]:
    n = args.concurrency * args.waves
    url = (server if args.against_sim
           else f"{server}/sched/0/{args.step_ms:g}/burst/{args.concurrency}")
    out = work / f"{client.replace(' ', '-')}-{time.time_ns()}.json"
    if not args.against_sim:
        get_json(server + "/bursts")  # clear
    finish_client(start_client(_command(client, args, url, n, tok_dir, out), cwd=work), out,
                  client)
    row: dict[str, Any] = {"client": client}
    if client.startswith("specgrid"):
        row.update(own_view(json.loads(out.read_text()), args.concurrency))
    if args.against_sim:
        return row
    releases = get_json(server + "/bursts")
    per_wave = waves(releases)
    lags = [x for w in per_wave for x in w]
    row.update({
        "waves": len(per_wave),
        "burst_p50_ms": 1e3 * pct(lags, 50), "burst_p99_ms": 1e3 * pct(lags, 99),
        "spread_p50_ms": 1e3 * pct([w[-1] for w in per_wave], 50),
        "spread_max_ms": 1e3 * max(w[-1] for w in per_wave),
        "release_ms": 1e3 * pct([r["last_write"] - r["first_write"] for r in releases
                                  if r["full"]], 50),
    })
    return row


def _table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    print(f"\nload average {os.getloadavg()[0]:.2f}; median of {args.rounds} rounds, "
          "runs in brackets (ms)")

    def cell(mine: list[dict[str, Any]], key: str) -> str:
        xs = [r[key] for r in mine]
        return f"{pct(xs, 50):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"

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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--waves", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--clients", nargs="+", default=list(CLIENTS[:2]), choices=CLIENTS)
    ap.add_argument("--sglang-python", default=str(ROOT / ".venv-engines/bin/python"))
    ap.add_argument("--before-root",
                    help="the checkout the client named 'specgrid before' runs from")
    ap.add_argument("--against-sim", action="store_true",
                    help="specgrid's clients against the simulator instead (no server stamps)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if "specgrid before" in args.clients and not args.before_root:
        ap.error("the client 'specgrid before' needs --before-root")
    if args.against_sim and "sglang rust" in args.clients:
        ap.error("--against-sim runs specgrid's clients only (it has no server stamps)")
    server_proc, server = (launch_sim(SIM, SERVER_CPU) if args.against_sim
                           else fixed_schedule_server.launch(SERVER_CPU, "--no-record"))
    rows = []
    with stopping(server_proc):
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
    _table(args, rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main_or_worker(main, client_worker)
