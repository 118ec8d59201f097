"""CPU per event of the raw transport's read path on an SGLang-native stream, in-process:
``H1Connection.data_received`` (llhttp) feeding ``NativeSink`` (SSE framing, token counts,
stamps), on bench/fixed_schedule_server.py's own frames (256 tokens, 1-3 per event, cumulative
text), with 1, 4 and 17 events per read. No sockets, no event loop: the Python cost per event
that every streamed chunk pays. Best of 7 repetitions of 50 streams x 4.

``--root`` picks the checkout whose ``actors/`` is measured (``git archive <commit> | tar -x
-C /tmp/before`` then ``--root /tmp/before`` for a before/after).

    python bench/native_stream_cost.py [--root DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _common import ROOT
from _stream import STREAM_HEAD, NullTransport, chunk_plan, frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(ROOT), help="checkout whose actors/ to import")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.root).resolve()))
    from actors.loadgen.h1 import H1Connection
    from actors.loadgen.sinks import NativeSink
    from actors.loadgen.timeline import Timeline

    for per_read in (1, 4, 17, 64):
        streams = []
        for i in range(50):
            chunks = frames(chunk_plan(f"p{i}", 256, 3), 10, False, False, True, None)
            reads = [STREAM_HEAD] + [b"".join(chunks[j:j + per_read])  # type: ignore[arg-type]
                                     for j in range(0, len(chunks), per_read)]
            streams.append((reads, len(chunks)))
        events = sum(n for _, n in streams)
        best = float("inf")
        for _ in range(7):
            t0 = time.process_time()
            for _ in range(4):
                for reads, n in streams:
                    conn = H1Connection()
                    conn.connection_made(NullTransport())  # type: ignore[arg-type]
                    conn.begin()
                    tl = Timeline(0.0)
                    sink = NativeSink(tl)
                    conn.sink = sink.feed
                    for r in reads:
                        conn.data_received(r)
                    sink.finish()
                    assert conn.error is None and len(tl.chunk_times) == n
            best = min(best, (time.process_time() - t0) / (4 * events))
        print(f"{per_read:>2} events per read: {best * 1e6:.2f} µs per event")


if __name__ == "__main__":
    main()
