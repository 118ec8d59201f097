"""CPU cost of HTTP/1.1 response parsing per streamed chunk, in-process: the raw transport's
connection (actors/loadgen/h1.py, llhttp through httptools) against h11 (httpx's default
parser), on the same bytes: an SGLang-native ``/generate`` stream of 128 chunked SSE events
with cumulative text (the fixed-schedule server's shape), fed one HTTP chunk per read and
whole. Parsing only: the SSE/JSON work after it is the same for every transport.

    python bench/h1_parse_cost.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import h11
from _stream import NullTransport

from actors.loadgen.h1 import H1Connection

EVENTS = 128


def response() -> tuple[bytes, list[bytes]]:
    """(head, one HTTP chunk per event) of a chunked SSE response."""
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunks = []
    for i in range(1, EVENTS + 1):
        meta = {"id": "x", "finish_reason": None, "prompt_tokens": 7, "completion_tokens": 2 * i}
        ev = b"data: " + json.dumps({"text": "tok " * 2 * i, "meta_info": meta}).encode() + b"\n\n"
        chunks.append(b"%x\r\n%b\r\n" % (len(ev), ev))
    chunks[-1] += b"0\r\n\r\n"
    return head, chunks


def raw_llhttp(reads: list[bytes]) -> int:
    conn = H1Connection()
    conn.connection_made(NullTransport())  # type: ignore[arg-type]
    conn.begin()
    got = 0

    def sink(data: bytes, t: float) -> None:
        nonlocal got
        got += len(data)

    conn.sink = sink
    for r in reads:
        conn.data_received(r)
    assert conn.eof and conn.error is None
    return got


def h11_parser(reads: list[bytes]) -> int:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/generate", headers=[("Host", "x"),
                                                                       ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    got = 0
    for r in reads:
        conn.receive_data(r)
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                break
            if isinstance(ev, h11.Data):
                got += len(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                return got
    raise AssertionError("response did not end")


def measure(fn: Callable[[list[bytes]], int], reads: list[bytes], repeat: int) -> float:
    """µs per event (best of 3 timings of ``repeat`` responses)."""
    fn(reads)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(reads)
        best = min(best, time.perf_counter() - t0)
    return best / repeat / EVENTS * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    head, chunks = response()
    shapes = {"one HTTP chunk per read": [head, *chunks],
              "whole response in one read": [head + b"".join(chunks)]}
    print("| parser | " + " | ".join(shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    for name, fn in (("raw: H1Connection (llhttp/httptools)", raw_llhttp),
                     ("h11 (httpx default)", h11_parser)):
        cells = [f"{measure(fn, reads, args.repeat):.2f} µs/event" for reads in shapes.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
