"""Benchmark of the conversation runner: one client process driving many concurrent multi-turn
conversations with long contexts against bench/fixed_schedule_server.py.

Default: 256 conversations in flight (closed loop), 16 rounds each, contexts growing to ~16k
tokens (each round adds a ~4 KB observation and the ~100-character recorded reply of the round
before; 4 characters per token), 32 output tokens per round; the server answers on a fixed
schedule (TTFT ``--ttft-ms``, then a chunk of 1-3 tokens every ``--chunk-ms``) and a second run
with a zero-delay server shows the client's ceiling. Reported per run: rounds/s, client CPU
per round (process CPU time / rounds sent), dispatch lag p50/p99 (all rounds, and rounds after
the first, whose due time is their predecessor's end), event-loop lag p99 (a 5 ms ticker), and
the machine's state: load average and the share of a core a spinning process got just before
the run (on a shared machine the client can be starved of CPU, and its dispatch lag then shows
the machine, not the client). A reference run at ``--reference-conversations`` (16) in flight
on the paced server comes first.

Server pinned to CPU 0 and client to CPU 1 when the machine has two or more CPUs.

    python bench/conversation_replay.py [--conversations 256 --turns 16 --context-tokens 16384]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import fixed_schedule_server
from _common import CLIENT_CPU, SERVER_CPU, cpu_available, pin, run_on, stopping

from actors.loadgen.conversation import run_conversations
from actors.loadgen.conversation_plan import ConversationLoadSpec
from actors.loadgen.spec import LoadResult
from workloads.conversations import Conversation, Turn

WORDS = ("def", "return", "self", "value", "test", "assert", "path", "error", "config", "load")


def observation(conv: int, turn: int, chars: int) -> str:
    """A deterministic tool observation of ``chars`` characters, unique per (conv, turn)."""
    head = f"[conversation {conv} round {turn}] $ run_tests\n"
    line = " ".join(WORDS[(conv + turn + j) % len(WORDS)] for j in range(12)) + "\n"
    body = (line * (chars // len(line) + 1))[: max(0, chars - len(head))]
    return head + body


def conversations(n: int, turns: int, context_tokens: int) -> tuple[Conversation, ...]:
    reply_chars = 100
    delta = max(64, (context_tokens * 4) // turns - reply_chars)
    out = []
    for c in range(n):
        ts = []
        for k in range(turns):
            role = "user" if k == 0 else "tool"
            ts.append(Turn(messages=({"role": role, "content": observation(c, k, delta)},),
                           reply={"role": "assistant",
                                  "content": (f"Round {k}: calling the next tool. " * 4)[
                                      :reply_chars]}))
        out.append(Conversation(f"bench-{c}", tuple(ts), system="You are a coding agent."))
    return tuple(out)


async def _with_ticker(spec: ConversationLoadSpec) -> tuple[LoadResult, list[float]]:
    """Run the load with a ticker that records how late each 5 ms sleep wakes up."""
    lags: list[float] = []

    async def tick() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - t - 0.005)

    task = asyncio.get_running_loop().create_task(tick())
    try:
        return await run_conversations(spec), lags
    finally:
        task.cancel()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conversations", type=int, default=256)
    p.add_argument("--reference-conversations", type=int, default=16)
    p.add_argument("--turns", type=int, default=16)
    p.add_argument("--context-tokens", type=int, default=16384)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--chunk-ms", type=float, default=10.0)
    p.add_argument("--endpoint", default="generate", choices=["generate", "chat"])
    p.add_argument("--json", type=Path, help="write the results here too")
    args = p.parse_args()

    pin(CLIENT_CPU)
    server, base_url = fixed_schedule_server.launch(SERVER_CPU, "--no-record")
    convs = conversations(args.conversations, args.turns, args.context_tokens)
    results: dict[str, Any] = {"args": vars(args) | {"json": None}, "runs": {}}
    with stopping(server):
        n, n_ref = args.conversations, args.reference_conversations
        runs = {f"paced_{n_ref}": (args.ttft_ms, args.chunk_ms, n_ref),
                f"paced_{n}": (args.ttft_ms, args.chunk_ms, n),
                f"zero_delay_{n}": (0.0, 0.0, n)}
        for name, (ttft, chunk, conc) in runs.items():
            url = f"{base_url}/sched/{ttft:g}/{chunk:g}"
            spec = ConversationLoadSpec(url=url, conversations=convs[:conc],
                                        endpoint=args.endpoint, concurrency=conc,
                                        think_time="none", max_new_tokens=args.output_tokens,
                                        request_timeout_s=120)
            load0 = os.getloadavg()
            avail = cpu_available()
            t0 = time.perf_counter()
            res, loop_lags = run_on("uvloop", _with_ticker(spec))
            wall = time.perf_counter() - t0
            loop_lags.sort()
            ok = [r for r in res.rows if r["status"] == "ok"]
            last = [r["request_chars"] for r in ok if r["turn_index"] == args.turns - 1]
            st = res.stats
            run = {
                "server_schedule_ms": [ttft, chunk], "conversations": conc, "wall_s": wall,
                "cpu_available_before": avail,
                "loop_lag_p99_ms": 1e3 * loop_lags[int(0.99 * (len(loop_lags) - 1))],
                "rounds_ok": st["rounds_ok"], "rounds_sent": st["rounds_sent"],
                "rounds_per_s": st["rounds_per_s"],
                "client_cpu_per_round_ms": st["client_cpu_per_round_ms"],
                "client_cpu_share": st["client_cpu_s"] / st["window_s"],
                "dispatch_lag_p50_ms": 1e3 * st["dispatch_lag_p50_s"],
                "dispatch_lag_p99_ms": 1e3 * st["dispatch_lag_p99_s"],
                "dispatch_lag_later_rounds_p99_ms": 1e3 * st["dispatch_lag_later_rounds_p99_s"],
                "last_round_request_kb": (sum(last) / len(last) / 1024) if last else None,
                "loadavg_before": load0, "loadavg_after": os.getloadavg(),
                "event_loop": st["event_loop"],
                "ttft_p50_ms": 1e3 * sorted(r["ttft_s"] for r in ok)[len(ok) // 2],
            }
            results["runs"][name] = run
            print(f"== {conc} conversations, server TTFT {ttft:g} ms chunk {chunk:g} ms: "
                  f"{run['rounds_ok']}/{run['rounds_sent']} rounds ok in {wall:.1f} s, "
                  f"{run['rounds_per_s']:.0f} rounds/s, client CPU "
                  f"{run['client_cpu_per_round_ms']:.2f} ms/round "
                  f"({run['client_cpu_share']:.0%} of a core), dispatch lag p50 "
                  f"{run['dispatch_lag_p50_ms']:.2f} ms p99 {run['dispatch_lag_p99_ms']:.2f} ms "
                  f"(later rounds p99 {run['dispatch_lag_later_rounds_p99_ms']:.2f} ms), loop "
                  f"lag p99 {run['loop_lag_p99_ms']:.2f} ms, last round request "
                  f"{run['last_round_request_kb']:.0f} KB, TTFT p50 {run['ttft_p50_ms']:.1f} ms; "
                  f"machine: load avg {load0[0]:.1f} -> {run['loadavg_after'][0]:.1f}, a "
                  f"spinning process got {avail:.0%} of a core", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
