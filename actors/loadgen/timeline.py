"""What one streamed request records (``Timeline``, filled by the stream parsers in
actors/loadgen/sinks.py and read by the rows, the self-check and the stopping watch) and how a
request fails in a way the server told us (``StreamError``)."""

from __future__ import annotations


class StreamError(Exception):
    """A request failed in a way the server told us (HTTP status, error event, abort)."""


class Timeline:
    """Everything recorded about one request (times are ``perf_counter()`` seconds)."""

    __slots__ = (
        "scheduled", "slot", "sent", "end", "chunk_times", "chunk_tokens", "error",
        "input_tokens", "output_tokens", "finish_reason", "spec_verify_ct", "merged",
        "server_queue_s", "server_ttft_s", "output_text",
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

    def add_chunk(self, t: float, k: int) -> None:
        """A content event carrying ``k`` new tokens arrived at ``t``."""
        times = self.chunk_times
        if times and times[-1] == t:
            self.merged += 1
        times.append(t)
        self.chunk_tokens.append(k)
