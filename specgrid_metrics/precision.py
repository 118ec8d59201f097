"""Precision targets: a cell stops issuing requests once the 95 % interval of each target
metric over its steady-state window is at most ``half_width`` (relative: (hi - lo) / 2 /
estimate) wide. The interval is the report's own (specgrid_metrics/intervals.py, the seeded
bootstrap over requests); this module says which targets exist, how many samples each needs
before its interval is believed, and how a running cell looks to the report had it stopped
now. Pure: no clocks, no sockets."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specgrid_metrics.intervals import (
    RATES,
    RequestArrays,
    cell_intervals,
    percentile_of,
    relative_half_width,
)
from specgrid_metrics.window import Window, inside, steady_window

MIN_WINDOW_REQUESTS = 10
"""A throughput interval over fewer requests living inside the window is not believed (the
report flags such a cell ``loose_interval`` whatever its width; grid/analysis/cellstats.py)."""
TAIL_SAMPLES = 10
"""A percentile's interval needs this many samples beyond it on its rarer side: at least
TAIL_SAMPLES / min(q, 1 - q) requests inside the window (p50: 20, p90: 100, p99: 1000). With
fewer, the bootstrap's upper bound is one of the few largest values and its width means little
(p99 of 100 requests rests on the single largest)."""
TARGET_METRICS = ("output_tok_s", "req_s")
"""Rate metrics a target may name (goodput needs the SLOs, which the load generator does not
know); latency percentiles are named ``<ttft|tpot|e2e>_p<q>`` (``_s`` optional)."""


@dataclass(frozen=True)
class Target:
    """Stop when ``metric``'s 95 % interval is at most ``half_width`` x its estimate wide on each
    side (0.05 = ±5 %)."""

    metric: str
    """An intervals.py metric name: output_tok_s, req_s or <ttft|tpot|e2e>_p<q>_s."""
    half_width: float

    @property
    def min_samples(self) -> int:
        """Requests that must live inside the window before this target's interval counts."""
        pct = percentile_of(self.metric)
        if pct is None:
            return MIN_WINDOW_REQUESTS
        q = pct[1]
        # the rarer side of the quantile: 1 - q above a high percentile, q below a low one
        return max(MIN_WINDOW_REQUESTS, math.ceil(TAIL_SAMPLES / min(q, 1.0 - q) - 1e-9))

    def describe(self) -> str:
        return f"{self.metric} ±{self.half_width * 100:g} %"


def normalize_metric(name: str) -> str | None:
    """The intervals.py name of a target metric (`ttft_p50` -> `ttft_p50_s`), None if unknown."""
    if name in TARGET_METRICS:
        return name
    full = name if name.endswith("_s") else f"{name}_s"
    return full if percentile_of(full) is not None else None


def parse_targets(value: Any, key: str = "load.target") -> tuple[Target, ...]:
    """Targets from a config value: None (no target), one mapping ``{metric, half_width}`` or a
    list of them (all must be met). ValueError with one line naming the problem."""
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    if not items:
        return ()
    targets = []
    for item in items:
        if not isinstance(item, Mapping) or set(item) != {"metric", "half_width"}:
            raise ValueError(f"{key} must be {{metric: NAME, half_width: FRACTION}} or a list "
                             f"of them, got {item!r}")
        metric = normalize_metric(str(item["metric"]))
        if metric is None:
            raise ValueError(f"{key}: unknown metric {item['metric']!r} (one of "
                             f"{', '.join(TARGET_METRICS)} or a latency percentile "
                             "<ttft|tpot|e2e>_p<q>, e.g. ttft_p50, tpot_p99)")
        hw = item["half_width"]
        if isinstance(hw, bool) or not isinstance(hw, int | float) or not 0 < hw < 1:
            raise ValueError(f"{key}: half_width of {metric} must be a fraction in (0, 1) "
                             f"(0.05 = ±5 %), got {hw!r}")
        targets.append(Target(metric, float(hw)))
    if len({t.metric for t in targets}) < len(targets):
        raise ValueError(f"{key} names a metric twice")
    return tuple(targets)


def as_if_stopped(req: RequestArrays, tokens_so_far: np.ndarray, now: float,
                  concurrency: int | None, closed_loop: bool
                  ) -> tuple[RequestArrays, Window] | None:
    """A running cell as the report would see it had it stopped issuing at `now`: its window
    is the steady window of the requests sent so far (closed loop: from the c-th send; open
    loop: from the first; to the last send), and a request still running counts with what it
    has streamed so far, as if it ended at `now` with `tokens_so_far` tokens: its tokens
    inside the window (each request streams at a steady rate, so spreading what it has over
    [first token, now] puts about as many inside the window as its whole stream will) and
    its stream time, never as a finished request (it ends after the window: not among the
    window's requests, latencies or req/s). `req.e2e` is NaN for a running request. None
    while no steady window exists (closed loop: fewer sends than streams)."""
    sent = np.asarray(req.sent, dtype=float)
    if sent.size == 0 or (closed_loop and sent.size < int(concurrency or 1)):
        return None
    # the steady window of the sends alone (no end known: nothing drains after the last send)
    win = steady_window(sent, np.full(sent.size, np.nan), concurrency, closed_loop)
    if not win.steady:
        return None
    running = ~np.isfinite(req.e2e)
    # strictly after the window's end, so that no running request counts as ended inside it
    virtual_end = max(now, np.nextafter(win.end, np.inf))
    e2e = np.where(running, virtual_end - sent, req.e2e)
    tokens = np.where(running, np.asarray(tokens_so_far, dtype=float), req.output_tokens)
    ok = np.asarray(req.ok, dtype=bool) | running
    tpot = np.where(running, np.nan, req.tpot)
    snapshot = RequestArrays(sent, req.ttft, tpot, e2e, tokens, ok, req.verify)
    return snapshot, win


@dataclass(frozen=True)
class Check:
    """One evaluation of the targets."""

    met: bool
    """Every target has its samples and an interval at most its half-width wide."""
    widths: dict[str, float]
    """Achieved relative half-width per target metric (inf without an interval)."""
    samples: dict[str, int]
    """Requests inside the window per target metric (for percentiles: completed ones)."""
    requests: int
    """Requests the check looked at."""

    def worst(self, targets: Sequence[Target]) -> Target:
        """The target furthest from its goal (the one that keeps the cell running)."""
        return max(targets, key=lambda t: self.widths.get(t.metric, math.inf) / t.half_width)


def check(req: RequestArrays, targets: Sequence[Target], concurrency: int | None,
          closed_loop: bool, replicates: int, seed: int, window: Window | None = None,
          scale: float = 1.0) -> Check:
    """Evaluate the targets on `req` (the cell's own window, or `window`); `scale` widens
    every goal (a client holding 1/N of a cell checks its share at goal x sqrt(N): the pooled
    interval of N equal, independent shares is 1/sqrt(N) of one share's)."""
    metrics = tuple(t.metric for t in targets)
    row, _ = cell_intervals(req, concurrency, closed_loop, replicates, seed, window=window,
                            metrics=metrics)
    win = window if window is not None else Window(row["window_start"], row["window_end"],
                                                   bool(row["steady"]), 0.0, 0.0)
    lived = inside(req.sent, req.end, win)
    lat = lived & np.asarray(req.ok, dtype=bool)
    widths, samples = {}, {}
    met = bool(win.steady)
    for t in targets:
        widths[t.metric] = relative_half_width(row, t.metric)
        samples[t.metric] = int(lived.sum() if t.metric in RATES else lat.sum())
        met = met and samples[t.metric] >= t.min_samples and \
            widths[t.metric] <= t.half_width * scale
    return Check(met, widths, samples, len(req))


def describe_result(targets: Sequence[Target], result: Check, reached: bool) -> str:
    """`output_tok_s ±4.1 % after 96 requests (target ±5 %)` or `precision not reached: ...`"""
    worst = result.worst(targets)
    width = result.widths.get(worst.metric, math.inf)
    digits = 1  # enough to tell a miss from the goal: ±10.01 %, never ±10.0 % of a ±10 % goal
    while digits < 4 and width > worst.half_width and \
            round(width * 100, digits) <= worst.half_width * 100:
        digits += 1
    shown = f"±{width * 100:.{digits}f} %" if math.isfinite(width) else "no interval"
    text = (f"{worst.metric} {shown} after {result.requests} requests "
            f"(target ±{worst.half_width * 100:g} %")
    if result.samples.get(worst.metric, 0) < worst.min_samples:
        text += f"; {result.samples.get(worst.metric, 0)} of the {worst.min_samples} requests " \
                "inside the window it needs"
    text += ")"
    return text if reached else f"precision not reached: {text}"
