"""Accept length of speculative decoding: per request, per cell, and from the server's counters.
Pure functions, no Ray, no sockets.

Definitions:

* **SGLang's** (kept for comparability, ``accept_length``): completion_tokens / spec_verify_ct
  of one request's final ``meta_info`` (SGLang 0.5.23 ``srt/managers/tokenizer_manager.py``
  computes ``meta_info["spec_accept_length"]`` exactly so). It counts the first token, which
  prefill produces, not a verify step: at n output tokens it is (n / (n - 1)) times the
  decode-only figure (about 7 % high at 16 tokens, 0.8 % at 128).
* **decode-only** (``accept_length_decode``): (completion_tokens - 1) / spec_verify_ct: tokens
  produced per verify step during decode. A cell's is Σ(completion - 1) / Σ spec_verify_ct.
* **from the server's counters** (``accept_length_source = "server_metrics"``): endpoints that
  carry no per-request verify count (OpenAI chat/completions) get the cell's figures from
  ``/metrics`` counter deltas over the cell (first scrape just before the measured window, last
  just after): Δ``sglang:generation_tokens_total`` / Δ``sglang:spec_verify_calls_total``, and
  decode-only (Δgeneration - Δ``sglang:num_requests_total``) / Δverify. SGLang 0.5.23
  (``srt/observability/metrics_collector.py``, ``observe_one_finished_request``) adds a
  request's completion tokens, its verify count and 1 request to these counters when it
  finishes, so the deltas cover exactly the requests that finished between the scrapes (also
  any request from someone else meanwhile: the figure is labelled with its source).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specgrid_metrics.counters import Sample, counter_delta

GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
REQUESTS = "sglang:num_requests_total"

def accept_length_decode(completion_tokens: int | None, spec_verify_ct: int | None
                         ) -> float | None:
    """(completion_tokens - 1) / spec_verify_ct; None without speculation."""
    if completion_tokens is None or not spec_verify_ct or completion_tokens < 1:
        return None
    return (completion_tokens - 1) / spec_verify_ct


def cell_accept_length_decode(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """Σ(output_tokens - 1) / Σ spec_verify_ct over completed requests with spec_verify_ct > 0."""
    num = den = 0
    for r in rows:
        v, n = r.get("spec_verify_ct"), r.get("output_tokens")
        if r.get("status") == "ok" and v and n:
            num += n - 1
            den += v
    return num / den if den else None


def server_accept_length(samples: Sequence[Sample]) -> dict[str, Any]:
    """The cell's accept length from the server's counters (see the module doc): keys
    ``accept_length``, ``accept_length_decode`` (None when not derivable) and
    ``accept_length_source`` (``"server_metrics"``, or None when the counters are missing or
    saw no verify step)."""
    gen = counter_delta(samples, GENERATION_TOKENS)
    ver = counter_delta(samples, VERIFY_CALLS)
    req = counter_delta(samples, REQUESTS)
    if gen is None or not ver:
        return {"accept_length": None, "accept_length_decode": None,
                "accept_length_source": None}
    return {
        "accept_length": gen / ver,
        "accept_length_decode": (gen - req) / ver if req is not None else None,
        "accept_length_source": "server_metrics",
    }
