"""``Tally``: a client's live counts of its requests (prompt requests or conversation rounds), for
the driver's progress display and its stall watch (grid/execute/stall.py).

Written only by the load's event loop, once when a request starts and once when it ends (never
per chunk: the chunks of a request in flight are read from its ``Timeline``, which the stream
parser fills anyway); read from another thread (the actor's own loop) while the load runs.
Each field is one int, read whole under the GIL; the one copy of the requests in flight is one
C-level step (``list(dict.values())``)."""

from __future__ import annotations

from actors.loadgen.timeline import Timeline


class Tally:
    def __init__(self) -> None:
        self.done = 0
        """Measured requests (rounds) finished, failed ones included."""
        self.tokens = 0
        """Output tokens of the measured requests that succeeded."""
        self.errors = 0
        """Measured requests that failed."""
        self.settled = 0
        """Streamed chunks and successful completions of the requests that ended, warm-up
        included."""
        self._open: dict[int, Timeline] = {}

    def begin(self, tl: Timeline) -> None:
        """A request is about to be sent."""
        self._open[id(tl)] = tl

    def end(self, tl: Timeline, measured: bool = True) -> None:
        """A request ended (``tl`` is complete); ``measured``: False for a warm-up request."""
        # Out of the open requests first, then into `settled`: a reader between the two sees
        # the request's chunks in neither (a dip), never in both (a rise that is no progress).
        self._open.pop(id(tl), None)
        ok = tl.error is None
        self.settled += len(tl.chunk_times) + ok
        if measured:
            self.done += 1
            if ok:
                self.tokens += tl.output_tokens or 0
            else:
                self.errors += 1

    def in_flight(self) -> int:
        """Requests started and not yet ended."""
        return len(self._open)

    def progress(self) -> dict[str, int]:
        """``done``, ``tokens``, ``errors``: the measured requests so far (the display);
        ``activity``: streamed chunks plus successful completions so far, warm-up included,
        which grows while the server answers (the stall watch) and, read this way, never
        rises without a new chunk or completion."""
        settled = self.settled  # before the copy: see `end`
        streaming = list(self._open.values())
        return {"done": self.done, "tokens": self.tokens, "errors": self.errors,
                "activity": settled + sum(len(tl.chunk_times) for tl in streaming)}
