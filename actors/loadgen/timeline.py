"""What one streamed request records (``Timeline``, filled by the stream parsers in
actors/loadgen/sinks.py and read by the rows, the self-check and the stopping watch) and how a
request fails in a way the server told us (``StreamError``), and the modelled clock a
simulator's figures are reported in (``Clock``)."""

from __future__ import annotations


class StreamError(Exception):
    """A request failed in a way the server told us (HTTP status, error event, abort)."""


class Timeline:
    """Everything recorded about one request (times are ``perf_counter()`` seconds)."""

    __slots__ = (
        "scheduled", "slot", "sent", "end", "chunk_times", "chunk_tokens", "error",
        "input_tokens", "output_tokens", "finish_reason", "spec_verify_ct", "merged",
        "server_queue_s", "server_ttft_s", "output_text", "accept_histogram",
    )

    def __init__(self, scheduled: float) -> None:
        self.scheduled = scheduled
        self.slot = scheduled  # when a concurrency slot was obtained (open loop with a cap)
        self.sent = scheduled
        self.end: float | None = None
        self.chunk_times: list[float] = []
        self.chunk_tokens: list[int] = []
        self.error: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.finish_reason: str | None = None
        self.spec_verify_ct: int | None = None
        self.merged = 0
        """Token events that arrived in the same read as the previous one (same stamp)."""
        self.server_queue_s: float | None = None
        self.server_ttft_s: float | None = None
        """SGLang's own queue time and first-token latency (native stream meta_info)."""
        self.output_text: str | None = None
        """The generated text as streamed (the native stream's final cumulative ``text``; the
        chat stream's deltas joined at ``finish``), for the losslessness check."""
        self.accept_histogram: list[int] | None = None
        """The server's per-request acceptance histogram: [n] = verify steps that accepted
        exactly n draft tokens (actors/loadgen/sinks.py says where each server puts it)."""

    def add_chunk(self, t: float, k: int) -> None:
        """A content event carrying ``k`` new tokens arrived at ``t``."""
        times = self.chunk_times
        if times and times[-1] == t:
            self.merged += 1
        times.append(t)
        self.chunk_tokens.append(k)


class Clock:
    """The server's clock against this client's ``perf_counter()``: a simulator run at
    ``engine.options.time_scale`` s spends s wall seconds per modelled second, so a measured
    interval is reported as wall / s and a modelled wait (an arrival offset, a think time, the
    window's ``duration_s``) is waited as modelled x s (docs/loadgen.md "The modelled clock").
    Scale 1 (a real server): every time as measured. The client's own timing error (its
    event-loop lag, a few ms) is divided by s too: the plan and the report state it."""

    __slots__ = ("t0", "scale")

    def __init__(self, t0: float, scale: float = 1.0) -> None:
        if not scale > 0:
            raise ValueError(f"clock scale must be > 0, got {scale}")
        self.t0, self.scale = t0, scale

    def wall(self, modelled_s: float) -> float:
        """Wall seconds of a modelled interval."""
        return modelled_s * self.scale

    def at(self, t: float) -> float:
        """A perf_counter time on the modelled clock (same origin ``t0``)."""
        return self.t0 + (t - self.t0) / self.scale

    def modelled(self, tl: Timeline) -> Timeline:
        """``tl`` with every time on the modelled clock (``tl`` itself at scale 1)."""
        if self.scale == 1.0:
            return tl
        out = Timeline(self.at(tl.scheduled))
        for name in Timeline.__slots__:
            setattr(out, name, getattr(tl, name))
        out.scheduled, out.slot, out.sent = (self.at(tl.scheduled), self.at(tl.slot),
                                             self.at(tl.sent))
        out.end = None if tl.end is None else self.at(tl.end)
        out.chunk_times = [self.at(t) for t in tl.chunk_times]
        out.server_queue_s = None if tl.server_queue_s is None else \
            tl.server_queue_s / self.scale
        out.server_ttft_s = None if tl.server_ttft_s is None else tl.server_ttft_s / self.scale
        return out
