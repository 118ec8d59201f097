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
  carry no per-request verify count (OpenAI chat/completions) get the cell's figures from the
  increases of the engine's ``/metrics`` counters over the cell; each engine names its counters
  (``engines/metrics.py`` ``MetricNames.accept_length``), and ``specgrid_metrics.counters`` computes
  the increases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


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
