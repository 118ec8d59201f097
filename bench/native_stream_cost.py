"""CPU per event of the raw transport's read path on an SGLang-native stream, in-process:
``H1Connection.data_received`` (llhttp) feeding ``NativeSink`` (SSE framing, token counts,
stamps), on bench/fixed_schedule_server.py's own frames (256 tokens, 1-3 per event, cumulative
text), with 1, 4, 17 and 64 events per read. No sockets, no event loop: the Python cost per
event that every streamed chunk pays. Best of 7 repetitions of 50 streams x 4.

Then HTTP/1.1 parsing alone on the same frames, one HTTP chunk per read and the whole response
in one read: the raw transport's connection (llhttp through httptools) against h11 (httpx's
default parser); the SSE/JSON work after it is the same for every transport.

``--root`` picks the checkout whose ``actors/`` is measured (``git archive <commit> | tar -x
-C /tmp/before`` then ``--root /tmp/before`` for a before/after).

    python bench/native_stream_cost.py [--root DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h11
from _common import ROOT
from _stream import STREAM_HEAD, NullTransport, chunk_plan, frames

Stream = tuple[list[bytes], int]
"""One response's reads and its events."""


def streams(per_read: int | None) -> list[Stream]:
    """50 responses, ``per_read`` events per read after the head's (None: all in one read)."""
    out = []
    for i in range(50):
        chunks: list[bytes] = frames(chunk_plan(f"p{i}", 256, 3), 10, False, False, True,
                                     None)  # type: ignore[assignment]
        if per_read is None:
            reads = [STREAM_HEAD + b"".join(chunks)]
        else:
            reads = [STREAM_HEAD] + [b"".join(chunks[j:j + per_read])
                                     for j in range(0, len(chunks), per_read)]
        out.append((reads, len(chunks)))
    return out


def best_us(feed: Callable[[list[bytes], int], None], data: list[Stream]) -> float:
    """µs per event of ``feed`` over every stream, best of 7 repetitions of 4 passes."""
    events = sum(n for _, n in data)
    best = float("inf")
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(4):
            for reads, n in data:
                feed(reads, n)
        best = min(best, (time.process_time() - t0) / (4 * events))
    return best * 1e6


def h11_feed(reads: list[bytes], n: int) -> None:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/generate", headers=[("Host", "x"),
                                                                       ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    for r in reads:
        conn.receive_data(r)
        while (ev := conn.next_event()) is not h11.NEED_DATA:
            if isinstance(ev, h11.EndOfMessage):
                return
    raise AssertionError("response did not end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(ROOT), help="checkout whose actors/ to import")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.root).resolve()))
    from actors.loadgen.h1 import H1Connection
    from actors.loadgen.sinks import NativeSink
    from actors.loadgen.timeline import Timeline

    def connection(sink: Callable[..., Any]) -> H1Connection:
        conn = H1Connection()
        conn.connection_made(NullTransport())  # type: ignore[arg-type]
        conn.begin()
        conn.sink = sink
        return conn

    def whole_path(reads: list[bytes], n: int) -> None:
        tl = Timeline(0.0)
        sink = NativeSink(tl)
        conn = connection(sink.feed)
        for r in reads:
            conn.data_received(r)
        sink.finish()
        assert conn.error is None and len(tl.chunk_times) == n

    def llhttp_feed(reads: list[bytes], n: int) -> None:
        conn = connection(lambda data, t: None)
        for r in reads:
            conn.data_received(r)
        assert conn.eof and conn.error is None

    for per_read in (1, 4, 17, 64):
        print(f"{per_read:>2} events per read: {best_us(whole_path, streams(per_read)):.2f} µs "
              "per event")
    shapes = {"one HTTP chunk per read": streams(1), "whole response in one read": streams(None)}
    print("\nparsing alone\n| parser | " + " | ".join(shapes) + " |\n|---|---|---|")
    for name, feed in (("raw: H1Connection (llhttp/httptools)", llhttp_feed),
                       ("h11 (httpx default)", h11_feed)):
        print(f"| {name} | " + " | ".join(f"{best_us(feed, data):.2f} µs/event"
                                          for data in shapes.values()) + " |")


if __name__ == "__main__":
    main()
