"""Server-side statistics and their Prometheus text, with SGLang's metric names.

Pure bookkeeping (no I/O): the scheduler core calls the ``on_*`` hooks, /metrics renders
``prometheus_text``. Names follow SGLang (``sglang:num_running_reqs`` ...), labels
``model_name`` and ``tp_rank``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 15.0, 20.0, 25.0, 30.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06,
               0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 90.0,
               120.0, 150.0, 180.0, 240.0, 300.0, 600.0)


@dataclass
class Histogram:
    """Cumulative-bucket histogram; ``observe(v, n)`` records n observations of v at once."""

    buckets: Sequence[float]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += n
        self.total += value * n
        self.count += n

    def lines(self, name: str, labels: str) -> list[str]:
        out, cum = [], 0
        for bound, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cum}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


@dataclass
class ServerStats:
    """Counters since start (Prometheus) and since the last /flush_cache (server_info)."""

    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    num_requests_total: int = 0
    num_aborted_requests_total: int = 0
    spec_verify_calls_total: int = 0
    num_retractions_total: int = 0
    decode_steps: int = 0
    prefill_steps: int = 0
    # since /flush_cache (SGLang's avg_spec_accept_length is lifetime-cumulative, reset there)
    cum_spec_accept_tokens: int = 0
    cum_spec_verify: int = 0
    cum_spec_correct: int = 0
    cum_spec_proposed: int = 0
    # recent window for gen_throughput / decode log lines
    last_gen_throughput: float = 0.0
    recent_accept_length: float = 0.0
    """Accept length over the last decode-log window (SGLang's spec_accept_length gauge)."""
    win_spec_tokens: int = 0
    win_spec_verify: int = 0
    lag_events: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))

    def roll_window(self) -> None:
        """Close a decode-log window: the recent accept length becomes its average."""
        if self.win_spec_verify:
            self.recent_accept_length = self.win_spec_tokens / self.win_spec_verify
        self.win_spec_tokens = self.win_spec_verify = 0

    def reset_spec_average(self) -> None:
        self.cum_spec_accept_tokens = self.cum_spec_verify = 0
        self.cum_spec_correct = self.cum_spec_proposed = 0

    @property
    def avg_spec_accept_length(self) -> float:
        if not self.cum_spec_verify:
            return 0.0
        return self.cum_spec_accept_tokens / self.cum_spec_verify

    @property
    def avg_spec_accept_rate(self) -> float:
        if not self.cum_spec_proposed:
            return 0.0
        return self.cum_spec_correct / self.cum_spec_proposed


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(
    stats: ServerStats,
    *,
    model_name: str,
    running: int,
    queued: int,
    token_usage: float,
    speculative: bool,
) -> str:
    """The /metrics page (Prometheus text exposition format 0.0.4)."""
    labels = f'model_name="{_esc(model_name)}",tp_rank="0"'
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float) -> None:
        lines.append(f"# HELP sglang:{name} {help_}")
        lines.append(f"# TYPE sglang:{name} {kind}")
        lines.append(f"sglang:{name}{{{labels}}} {float(value)}")

    metric("num_running_reqs", "gauge", "The number of running requests.", running)
    metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", queued)
    metric("gen_throughput", "gauge", "The generation throughput (token/s).",
           stats.last_gen_throughput)
    metric("token_usage", "gauge", "The token usage.", token_usage)
    metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0)
    if speculative:
        metric("spec_accept_length", "gauge", "The average acceptance length of speculative "
               "decoding.", stats.recent_accept_length)
        metric("spec_accept_rate", "gauge", "The average acceptance rate of speculative "
               "decoding.", stats.avg_spec_accept_rate)
    metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           stats.prompt_tokens_total)
    metric("generation_tokens_total", "counter", "Number of generation tokens processed.",
           stats.generation_tokens_total)
    metric("num_requests_total", "counter", "Number of requests processed.",
           stats.num_requests_total)
    metric("num_aborted_requests_total", "counter", "Number of requests aborted.",
           stats.num_aborted_requests_total)
    if speculative:
        metric("spec_verify_calls_total", "counter", "Number of speculative verify calls.",
               stats.spec_verify_calls_total)
    for name, help_, hist in (
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.",
         stats.ttft),
        ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
         stats.itl),
        ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
         stats.e2e),
    ):
        lines.append(f"# HELP sglang:{name} {help_}")
        lines.append(f"# TYPE sglang:{name} histogram")
        lines.extend(hist.lines(f"sglang:{name}", labels))
    return "\n".join(lines) + "\n"
