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
from typing import Any

HERE = Path(__file__).resolve().parent
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")


class _Transport:
    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(HERE.parent), help="checkout whose actors/ to import")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.root).resolve()))
    sys.path.insert(0, str(HERE))
    from fixed_schedule_server import _frames, chunk_plan

    from actors.loadgen.h1 import H1Connection
    from actors.loadgen.sinks import NativeSink
    from actors.loadgen.timeline import Timeline

    for per_read in (1, 4, 17, 64):
        streams = []
        for i in range(50):
            frames = _frames(chunk_plan(f"p{i}", 256, 3), 10, False, False, True, None)
            reads = [HEAD] + [b"".join(frames[j:j + per_read])  # type: ignore[arg-type]
                              for j in range(0, len(frames), per_read)]
            streams.append((reads, len(frames)))
        events = sum(n for _, n in streams)
        best = float("inf")
        for _ in range(7):
            t0 = time.process_time()
            for _ in range(4):
                for reads, n in streams:
                    conn = H1Connection()
                    conn.connection_made(_Transport())  # type: ignore[arg-type]
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
