"""Server-side statistics and their Prometheus exposition, with SGLang 0.5.23's metric names and
labels (python/sglang/srt/observability/metrics_collector.py; which series carry which labels:
docs/simulator.md "Wire format").

Pure bookkeeping (no I/O): the scheduler core updates ``ServerStats`` (plain numbers, cheap on
the hot path); /metrics renders them through prometheus_client (``SimCollector`` +
``generate_latest``), as SGLang exposes its metrics through prometheus_client too.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 15.0, 20.0, 25.0, 30.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06,
               0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 90.0,
               120.0, 150.0, 180.0, 240.0, 300.0, 600.0)
QUEUE_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0,
                 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0,
                 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0,
                 1800.0, 2000.0, 2500.0, 3000.0)
"""sglang:queue_time_seconds buckets (as recorded from SGLang 0.5.23)."""
STREAM_FLAGS = ("false", "true")
"""is_streaming label values, indexed by the request's ``stream`` bool."""


@dataclass
class Histogram:
    """Bucket counts; ``observe(v, n)`` records n observations of v at once."""

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

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        cum = 0
        for bound, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append((str(bound), cum))
        out.append(("+Inf", self.count))
        return out


def _pair(buckets: Sequence[float]) -> list[Histogram]:
    return [Histogram(buckets), Histogram(buckets)]


@dataclass
class ServerStats:
    """Counters since start (Prometheus) and since the last /flush_cache (server_info).
    Lists of two are indexed by is_streaming (0 = "false", 1 = "true")."""

    prompt_tokens: list[int] = field(default_factory=lambda: [0, 0])
    generation_tokens: list[int] = field(default_factory=lambda: [0, 0])
    num_requests: list[int] = field(default_factory=lambda: [0, 0])
    num_aborted_requests_total: int = 0
    spec_verify_calls_total: int = 0
    num_retractions_total: int = 0
    decode_steps: int = 0
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
    ttft: list[Histogram] = field(default_factory=lambda: _pair(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: list[Histogram] = field(default_factory=lambda: _pair(E2E_BUCKETS))
    queue_time: Histogram = field(default_factory=lambda: Histogram(QUEUE_BUCKETS))
    tpot: list[Histogram] = field(default_factory=lambda: _pair(ITL_BUCKETS))
    """Per-request (finished - first token) / (completion_tokens - 1), by is_streaming."""

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


@dataclass
class Snapshot:
    """Scheduler state read at scrape time."""

    running: int
    queued: int
    token_usage: float
    cache_hit_rate: float
    num_retracted: int
    max_total_tokens: int = 0
    context_len: int = 0
    used_tokens: int = 0
    spec_steps: int = 0
    spec_draft_tokens: int = 0


class SimCollector(Collector):
    """prometheus_client collector over one server's ``ServerStats``.

    Every name, type and label set exists in SGLang 0.5.23 (checked against a recording:
    tests/engines/sim/test_against_sglang.py). Labelled counters that SGLang creates on their
    first increment (num_aborted_requests_total, num_retracted_requests_total,
    spec_verify_calls_total) appear only once non-zero, as there."""

    def __init__(self, stats: ServerStats, model_name: str, speculative: bool,
                 snapshot: Any) -> None:
        self.stats = stats
        self.speculative = speculative
        self.snapshot = snapshot
        self.tok_labels = ["model_name", "engine_type"]
        self.tok_values = [model_name, "unified"]
        self.sched_labels = [*self.tok_labels, "tp_rank", "pp_rank", "moe_ep_rank"]
        self.sched_values = [*self.tok_values, "0", "0", "0"]
        self.pid = str(os.getpid())

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(f"sglang:{name}", doc, labels=self.sched_labels)
        g.add_metric(self.sched_values, float(value))
        return g

    def _counter(self, name: str, doc: str, value: float,
                 sched: bool = False) -> CounterMetricFamily:
        labels, values = ((self.sched_labels, self.sched_values) if sched
                          else (self.tok_labels, self.tok_values))
        c = CounterMetricFamily(f"sglang:{name}", doc, labels=labels)
        c.add_metric(values, float(value))
        return c

    def _used(self) -> list[bool]:
        """Which is_streaming series exist: prometheus_client creates a labelled child on its
        first use, so SGLang shows a series only once a request of that kind was counted."""
        st = self.stats
        return [bool(st.prompt_tokens[i] or st.generation_tokens[i] or st.num_requests[i]
                     or st.ttft[i].count) for i in (0, 1)]

    def _by_stream(self, name: str, doc: str, values: Sequence[int]) -> CounterMetricFamily:
        c = CounterMetricFamily(f"sglang:{name}", doc, labels=[*self.tok_labels, "is_streaming"])
        for flag, v, used in zip(STREAM_FLAGS, values, self._used(), strict=True):
            if used:
                c.add_metric([*self.tok_values, flag], float(v))
        return c

    def _hist(self, name: str, doc: str, hists: Sequence[Histogram],
              streaming: bool) -> HistogramMetricFamily:
        labels = [*self.tok_labels, "is_streaming"] if streaming else self.tok_labels
        h = HistogramMetricFamily(f"sglang:{name}", doc, labels=labels)
        used = self._used()
        for i, hist in enumerate(hists):
            if streaming and not used[i]:
                continue
            values = [*self.tok_values, STREAM_FLAGS[i]] if streaming else self.tok_values
            h.add_metric(values, hist.cumulative(), hist.total)
        return h

    def collect(self) -> Iterator[Metric]:
        st, snap = self.stats, self.snapshot()
        yield self._gauge("num_running_reqs", "The number of running requests.", snap.running)
        yield self._gauge("num_queue_reqs", "The number of requests in the waiting queue.",
                          snap.queued)
        yield self._gauge("gen_throughput", "The generation throughput (token/s).",
                          st.last_gen_throughput)
        yield self._gauge("token_usage", "The token usage.", snap.token_usage)
        yield self._gauge("num_used_tokens", "The number of used tokens.", snap.used_tokens)
        yield self._gauge("kv_used_tokens",
                          "Number of actively used token slots in the KV cache pool.",
                          snap.used_tokens)
        yield self._gauge("kv_available_tokens",
                          "Number of free token slots in the KV cache pool.",
                          max(0, snap.max_total_tokens - snap.used_tokens))
        yield self._gauge("max_total_num_tokens",
                          "Maximum total number of tokens in the KV cache pool.",
                          snap.max_total_tokens)
        yield self._gauge("context_len", "Maximum context length.", snap.context_len)
        yield self._gauge("cache_hit_rate", "The prefix cache hit rate.", snap.cache_hit_rate)
        retracted = GaugeMetricFamily("sglang:num_retracted_reqs",
                                      "The number of retracted requests.",
                                      labels=[*self.sched_labels, "pid"])
        retracted.add_metric([*self.sched_values, self.pid], float(snap.num_retracted))
        yield retracted
        # SGLang exposes the speculative gauges on every server (0 without speculation)
        yield self._gauge("spec_accept_length",
                          "The average acceptance length of speculative decoding.",
                          st.recent_accept_length if self.speculative else 0.0)
        yield self._gauge("spec_accept_rate",
                          "The average acceptance rate of speculative decoding.",
                          st.avg_spec_accept_rate if self.speculative else 0.0)
        yield self._gauge("spec_num_steps", "Currently active speculative_num_steps.",
                          snap.spec_steps)
        yield self._gauge("spec_num_draft_tokens",
                          "Currently active speculative_num_draft_tokens (decouples from "
                          "steps under topk>1).", snap.spec_draft_tokens)
        yield self._by_stream("prompt_tokens", "Number of prefill tokens processed.",
                              st.prompt_tokens)
        yield self._by_stream("generation_tokens", "Number of generation tokens processed.",
                              st.generation_tokens)
        yield self._by_stream("num_requests", "Number of requests processed.",
                              st.num_requests)
        if st.num_aborted_requests_total:
            yield self._counter("num_aborted_requests", "Number of requests aborted.",
                                st.num_aborted_requests_total)
        if st.num_retractions_total:
            yield self._counter("num_retracted_requests", "Total number of retracted requests.",
                                st.num_retractions_total, sched=True)
        if self.speculative and st.spec_verify_calls_total:
            yield self._counter("spec_verify_calls",
                                "Number of speculative decoding verification calls.",
                                st.spec_verify_calls_total)
        yield self._hist("time_to_first_token_seconds",
                         "Histogram of time to first token in seconds.", st.ttft, True)
        yield self._hist("inter_token_latency_seconds",
                         "Histogram of inter-token latency in seconds.", [st.itl], False)
        yield self._hist("e2e_request_latency_seconds",
                         "Histogram of End-to-end request latency in seconds", st.e2e, True)
        yield self._hist("request_time_per_output_token_seconds",
                         "Per-request TPOT in seconds: (finished_time - first_token_time) / "
                         "(completion_tokens - 1).", st.tpot, True)
        q = HistogramMetricFamily("sglang:queue_time_seconds",
                                  "Histogram of queueing time in seconds.",
                                  labels=self.sched_labels)
        q.add_metric(self.sched_values, st.queue_time.cumulative(), st.queue_time.total)
        yield q
