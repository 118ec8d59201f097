"""Goodput: the requests (and their tokens) that met every latency SLO, per second, by SGLang's
rule (sglang/benchmark/goodput.py `calculate_goodput` in SGLang 0.5.23; docs/report.md,
"Goodput"): a single-token response has no inter-token interval, its TPOT counts as 0. The
duration and the requests are the cell's steady-state window's (specgrid_metrics/window.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Slo:
    """Latency objectives in milliseconds; None = not part of the goodput test."""

    ttft_ms: float | None = None
    """Time to first token."""
    tpot_ms: float | None = None
    """Time per output token after the first: (E2E - TTFT) / (output tokens - 1)."""
    e2e_ms: float | None = None
    """End-to-end request latency."""

    def as_dict(self) -> dict[str, float | None]:
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}

    @property
    def any(self) -> bool:
        return any(v is not None for v in self.as_dict().values())

    def describe(self) -> str:
        parts = [f"{name[:-3].upper()} <= {value:g} ms"
                 for name, value in self.as_dict().items() if value is not None]
        return ", ".join(parts) if parts else "no SLO set (every successful request counts)"


def good_requests(ok: np.ndarray, ttft_s: np.ndarray, tpot_s: np.ndarray, e2e_s: np.ndarray,
                  output_tokens: np.ndarray, slo: Slo) -> np.ndarray:
    """Boolean per request: succeeded and met every SLO that is set (SGLang's rule)."""
    good = np.asarray(ok, dtype=bool).copy()
    n = np.asarray(output_tokens, dtype=float)
    # SGLang: "A single-token response has no inter-token interval; its TPOT counts as 0."
    tpot = np.where(n > 1, np.asarray(tpot_s, dtype=float), 0.0)
    for value, observed in ((slo.ttft_ms, ttft_s), (slo.tpot_ms, tpot), (slo.e2e_ms, e2e_s)):
        if value is not None:
            with np.errstate(invalid="ignore"):
                good &= np.asarray(observed, dtype=float) * 1000.0 <= value
    return good
