"""The steady-state window of a cell: the part of its load window in which the server saw the
full offered load, so that throughput and latency are not diluted by ramp-up and drain
(docs/report.md, "How the numbers are made"). Pure numpy; arrays are one entry per measured
request of the cell (errors included: an error occupies its stream while it lasts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """A cell's steady-state window (epoch seconds) and what lies outside it."""

    start: float
    end: float
    steady: bool
    """False: no steady part (one wave of requests); the window is the whole span."""
    ramp_s: float
    """From the first send to the window's start."""
    drain_s: float
    """From the window's end to the last request's end."""

    @property
    def length_s(self) -> float:
        return self.end - self.start


def steady_window(sent_at: np.ndarray, end_at: np.ndarray,
                  concurrency: int | None, closed_loop: bool) -> Window:
    """The window of one cell. ``end_at`` = sent_at + e2e (NaN for a request that never
    ended: it counts as running until the last known end)."""
    sent = np.sort(np.asarray(sent_at, dtype=float))
    if sent.size == 0:
        return Window(0.0, 0.0, False, 0.0, 0.0)
    ends = np.asarray(end_at, dtype=float)
    last_end = float(np.nanmax(ends)) if np.isfinite(ends).any() else float(sent[-1])
    k = min(int(concurrency or 1), sent.size) if closed_loop else 1
    start, end = float(sent[k - 1]), float(sent[-1])
    if end <= start:
        first = float(sent[0])
        return Window(first, max(last_end, first), False, 0.0, 0.0)
    return Window(start, end, True, start - float(sent[0]), max(0.0, last_end - end))


def tokens_in_window(sent_at: np.ndarray, ttft_s: np.ndarray, e2e_s: np.ndarray,
                     output_tokens: np.ndarray, window: Window) -> np.ndarray:
    """Output tokens of each request produced inside the window: its first token at
    sent + TTFT, the other n - 1 evenly over [first token, end]. Requests without timing
    (errors) give 0."""
    sent = np.asarray(sent_at, dtype=float)
    first = sent + np.asarray(ttft_s, dtype=float)
    end = sent + np.asarray(e2e_s, dtype=float)
    n = np.asarray(output_tokens, dtype=float)
    valid = np.isfinite(first) & np.isfinite(end) & np.isfinite(n) & (n > 0)
    a, b = window.start, window.end
    first_in = ((first >= a) & (first <= b)).astype(float)
    span = end - first
    overlap = np.clip(np.minimum(end, b) - np.maximum(first, a), 0.0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(span > 0, overlap / span, ((end >= a) & (end <= b)).astype(float))
    rest = np.clip(n - 1, 0, None) * frac
    return np.where(valid, first_in + rest, 0.0)


def inside(sent_at: np.ndarray, end_at: np.ndarray, window: Window) -> np.ndarray:
    """Requests that lived entirely inside the window (sent and finished in it)."""
    sent = np.asarray(sent_at, dtype=float)
    end = np.asarray(end_at, dtype=float)
    return (sent >= window.start) & np.isfinite(end) & (end <= window.end)


def ended_inside(end_at: np.ndarray, window: Window) -> np.ndarray:
    """Requests that finished inside the window (the requests/s of the window)."""
    end = np.asarray(end_at, dtype=float)
    return np.isfinite(end) & (end >= window.start) & (end <= window.end)
