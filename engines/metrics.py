"""The `/metrics` series specgrid reads from a server, by engine family (`MetricNames`), and the
accept length a cell gets from their increases. Engine-neutral: an engine names its family
(`Engine.metrics`), and a server someone else runs is told by the names it exposes
(`detect_family`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specgrid_metrics.counters import Sample, counter_delta


@dataclass(frozen=True)
class MetricNames:
    """The `/metrics` series of one engine family that specgrid reads. None = not exposed."""

    family: str
    """The name prefix, e.g. `sglang` or `vllm`."""
    generation_tokens: str | None = None
    """Counter of output tokens."""
    requests_finished: str | None = None
    """Counter of finished requests."""
    running: str | None = None
    """Gauge of running requests."""
    waiting: str | None = None
    """Gauge of queued requests."""
    kv_usage: str | None = None
    """Gauge of KV-cache use (0-1)."""
    spec_steps: str | None = None
    """Counter of verify steps, one per request per step (SGLang's verify calls, vLLM's drafts)."""
    spec_accepted: str | None = None
    """Counter of accepted draft tokens (vLLM)."""
    spec_draft_tokens: str | None = None
    """Counter of proposed draft tokens (vLLM)."""
    spec_accepted_per_pos: str | None = None
    """Counter of accepted draft tokens by position, label `position` (vLLM)."""

    def accept_length(self, samples: Sequence[Sample]) -> dict[str, Any]:
        """The cell's accept length from the increases of the speculative counters over the
        cell's scrapes (first just before the measured window, last just after):

        * ``accept_length`` = Δgeneration tokens / Δverify steps: SGLang's per-request
          definition (completion / verify steps, the first token included) summed over the cell;
        * ``accept_length_decode``: tokens per verify step during decode, 1 + Δaccepted /
          Δsteps where the engine counts accepted tokens (vLLM's own "mean acceptance length"),
          else (Δgeneration - Δrequests) / Δsteps (each request's first token comes from
          prefill, not a verify step);
        * ``acceptance_per_position``: Δaccepted at draft position i / Δsteps, the share of
          steps whose i-th draft token was accepted (vLLM), as a list;
        * ``accept_length_source``: ``"server_metrics"``, or None when the counters are missing
          or saw no verify step (then every figure is None).
        """
        none = {"accept_length": None, "accept_length_decode": None,
                "acceptance_per_position": None, "accept_length_source": None}
        steps = counter_delta(samples, self.spec_steps) if self.spec_steps else None
        if not steps:
            return none
        gen = counter_delta(samples, self.generation_tokens) if self.generation_tokens else None
        accepted = counter_delta(samples, self.spec_accepted) if self.spec_accepted else None
        requests = (counter_delta(samples, self.requests_finished)
                    if self.requests_finished else None)
        if accepted is not None:
            decode: float | None = 1.0 + accepted / steps
        elif gen is not None and requests is not None:
            decode = (gen - requests) / steps
        else:
            decode = None
        return {
            "accept_length": gen / steps if gen is not None else None,
            "accept_length_decode": decode,
            "acceptance_per_position": self.per_position(samples, steps),
            "accept_length_source": "server_metrics",
        }

    def per_position(self, samples: Sequence[Sample], steps: float) -> list[float] | None:
        """Δaccepted tokens at each draft position / Δsteps, positions in order; None when the
        engine exposes no per-position counter."""
        name = self.spec_accepted_per_pos
        if not name or not steps:
            return None
        by_position: dict[int, list[Sample]] = {}
        for sample in samples:
            if sample[1] == name and "position" in sample[2]:
                by_position.setdefault(int(sample[2]["position"]), []).append(sample)
        rates = []
        for position in sorted(by_position):
            delta = counter_delta(by_position[position], name)
            rates.append((delta or 0.0) / steps)
        return rates or None



SGLANG_METRICS = MetricNames(
    family="sglang",
    generation_tokens="sglang:generation_tokens_total",
    requests_finished="sglang:num_requests_total",
    running="sglang:num_running_reqs",
    waiting="sglang:num_queue_reqs",
    kv_usage="sglang:token_usage",
    spec_steps="sglang:spec_verify_calls_total",
)
"""SGLang 0.5.23 (`srt/observability/metrics_collector.py`): `observe_one_finished_request` adds
a request's completion tokens, its verify count and 1 request to these counters when it
finishes, so the deltas over a cell cover exactly the requests that finished in it."""

VLLM_METRICS = MetricNames(
    family="vllm",
    generation_tokens="vllm:generation_tokens_total",
    requests_finished="vllm:request_success_total",
    running="vllm:num_requests_running",
    waiting="vllm:num_requests_waiting",
    kv_usage="vllm:kv_cache_usage_perc",
    spec_steps="vllm:spec_decode_num_drafts_total",
    spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
    spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    spec_accepted_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos_total",
)
"""vLLM 0.32.0 (`vllm/v1/metrics/loggers.py`, `vllm/v1/spec_decode/metrics.py`): the speculative
counters grow per scheduled step with drafts, one draft per request per step, and the
per-position counter by the position of the accepted token in the draft."""

FAMILIES: Mapping[str, MetricNames] = {m.family: m for m in (SGLANG_METRICS, VLLM_METRICS)}
"""Metric families by name prefix, for a server whose engine is detected from its /metrics."""


def detect_family(names: Iterable[str]) -> MetricNames | None:
    """The metric family of a server from the names it exposes (`vllm:...`, `sglang:...`), or
    None when none is known."""
    for name in names:
        family = FAMILIES.get(name.split(":", 1)[0]) if ":" in name else None
        if family is not None:
            return family
    return None
