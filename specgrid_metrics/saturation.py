"""Over-saturation: a load the server cannot keep up with, told from the client's own
timestamps. Pure: functions of arrays of times, no clocks, no sockets.

The rule (``SaturationRule``: signal, window, Theil-Sen slope, rising significantly and
materially, throughput flat in closed loop; all must hold), why each part is as it is, and its
false positives on constructed queues and the shipped sweeps: docs/loadgen.md
("Over-saturation")."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

import numpy as np

BACKLOG_SAMPLES = 40
"""Times the open-loop backlog is sampled at over the window."""
MAX_POINTS = 400
"""At most this many points go into the Theil-Sen fit (every k-th beyond: its cost is
quadratic, 400 points ~80k pairwise slopes, a few ms)."""


@dataclass(frozen=True)
class SaturationRule:
    """The window is the last ``window_s`` (closed loop: at least ``e2e_windows`` median
    E2Es), at least ``min_window_s`` (closed loop: half the above) and ``min_points`` samples;
    material: closed loop a rise of ``rise_fraction`` of the TTFT's median and ``min_rise_s``,
    open loop ``min_rise_requests`` and ``min_growth_fraction`` of the window's arrivals;
    significant: the slope's ``confidence`` interval above 0 (closed), ``z`` count standard
    deviations (open); flat: the later half's throughput at most ``flat_tolerance`` above."""

    window_s: float = 10.0
    e2e_windows: float = 4.0
    min_window_s: float = 5.0
    min_points: int = 20
    rise_fraction: float = 0.5
    min_rise_s: float = 0.1
    min_rise_requests: float = 4.0
    min_growth_fraction: float = 0.1
    z: float = 3.0
    min_arrivals: int = 100
    """Open loop: the window spans at least this many arrivals at the rate seen so far (a
    slow rate needs a longer window for its growth to stand out of its counts' noise: 2x
    overload needs ~54 arrivals at z = 3, see `open_loop`)."""
    flat_tolerance: float = 0.10
    confidence: float = 0.95


@dataclass(frozen=True)
class Saturation:
    """One evaluation: `over_saturated` and its evidence (times in the inputs' clock)."""

    over_saturated: bool
    signal: str
    """`ttft` (closed loop, seconds) or `backlog` (open loop, requests)."""
    reason: str
    """Why it is (the evidence in words) or is not (the first rule that failed)."""
    start: float = float("nan")
    end: float = float("nan")
    points: int = 0
    slope: float = float("nan")
    """Signal units per second."""
    slope_lo: float = float("nan")
    slope_hi: float = float("nan")
    median: float = float("nan")
    rise: float = float("nan")
    """slope x window length."""
    throughput_ratio: float = float("nan")
    """Later half's finished output tokens / earlier half's."""

    def evidence(self, offset: float = 0.0) -> str:
        """JSON of the fit, window times shifted by `offset` (to epoch seconds)."""
        d = asdict(self)
        d["start"], d["end"] = self.start + offset, self.end + offset
        d["window_s"] = self.end - self.start
        return json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                           for k, v in d.items()}, sort_keys=True)


def _unit(signal: str) -> str:
    return "s/s" if signal == "ttft" else "requests/s"


def _fit(signal: str, x: np.ndarray, y: np.ndarray, start: float, end: float,
         done_at: np.ndarray, done_tokens: np.ndarray, floor: float,
         rule: SaturationRule, count_sd: float | None = None) -> Saturation:
    """The rule on the signal y(x) over [start, end]; `count_sd`: the open loop's standard
    deviation of the backlog's change (significance by counts instead of the slope's interval)."""
    no = Saturation(False, signal, "", start=start, end=end, points=int(x.size))
    if x.size < rule.min_points:
        return replace(no, reason=f"{x.size} points in the window, fewer than {rule.min_points}")
    if x.size > MAX_POINTS:
        step = int(np.ceil(x.size / MAX_POINTS))
        x, y = x[::step], y[::step]
    from scipy.stats import theilslopes  # here: scipy.stats adds ~0.7 s to a CLI start
    res = theilslopes(y, x, alpha=rule.confidence)
    slope, lo, hi = float(res.slope), float(res.low_slope), float(res.high_slope)
    median = float(np.median(y))
    rise = slope * (end - start)
    mid = (start + end) / 2.0
    early = float(done_tokens[(done_at >= start) & (done_at < mid)].sum())
    late = float(done_tokens[(done_at >= mid) & (done_at <= end)].sum())
    ratio = late / early if early > 0 else float("nan")
    no = replace(no, slope=slope, slope_lo=lo, slope_hi=hi, median=median, rise=rise,
                 throughput_ratio=ratio)
    unit = _unit(signal)
    if count_sd is None and not lo > 0:
        return replace(no, reason=f"no significant rise (slope {slope:.3g} {unit}, 95 % CI "
                       f"{lo:.3g} to {hi:.3g})")
    if count_sd is not None and not rise >= rule.z * count_sd:
        return replace(no, reason=f"no significant rise ({rise:.3g} requests over the window, "
                       f"below {rule.z:g} x {count_sd:.3g}, the spread of arrivals minus "
                       "completions)")
    needed = floor if count_sd is not None else max(rule.rise_fraction * median, floor)
    if rise < needed:
        return replace(no, reason=f"rise {rise:.3g} over the window below {needed:.3g}")
    if count_sd is None and not ratio <= 1.0 + rule.flat_tolerance:
        return replace(no, reason="throughput rising (later half / earlier half "
                       f"{ratio:.2f})")
    what = "TTFT" if signal == "ttft" else "backlog"
    because = (f"while throughput does not rise (later half / earlier half x{ratio:.2f})"
               if count_sd is None else f"a rise of {rise:.3g} requests in the window")
    return replace(no, over_saturated=True, reason=(
        f"{what} rising {slope:.3g} {unit} (95 % CI {lo:.3g} to {hi:.3g}) over {end - start:.1f} s "
        f"({x.size} points, median {median:.3g}), {because}"))


def closed_loop(sent: np.ndarray, ttft: np.ndarray, end: np.ndarray, tokens: np.ndarray,
                now: float, concurrency: int,
                rule: SaturationRule = SaturationRule()) -> Saturation:
    """The closed-loop check at time `now`. Per request: `sent`, `ttft` (NaN before its first
    token), `end` (NaN while running), output `tokens` (of finished requests)."""
    sent, ttft = np.asarray(sent, dtype=float), np.asarray(ttft, dtype=float)
    end, tokens = np.asarray(end, dtype=float), np.asarray(tokens, dtype=float)
    if sent.size < max(1, concurrency):
        return Saturation(False, "ttft", "not every stream busy yet")
    opened = float(np.sort(sent)[max(1, concurrency) - 1])
    finished = np.isfinite(end)
    e2e = end[finished] - sent[finished]
    typical = float(np.median(e2e)) if e2e.size else 0.0
    length = max(rule.window_s, rule.e2e_windows * typical)
    shortest = max(rule.min_window_s, rule.e2e_windows * typical / 2.0)
    start = max(opened, now - length)
    if now - start < shortest:
        return Saturation(False, "ttft", f"window {now - start:.1f} s shorter than "
                          f"{shortest:.1f} s", start=start, end=now)
    pick = (sent >= start) & (sent <= now) & np.isfinite(ttft)
    order = np.argsort(sent[pick])
    return _fit("ttft", sent[pick][order], ttft[pick][order], start, now, end[finished],
                np.nan_to_num(tokens[finished]), rule.min_rise_s, rule)


def open_loop(scheduled: np.ndarray, end: np.ndarray, tokens: np.ndarray, now: float,
              rule: SaturationRule = SaturationRule()) -> Saturation:
    """The open-loop check at time `now`: per arrival its `scheduled` time and `end` (NaN
    while it waits or runs), output `tokens` of finished ones. An end after `now` counts as
    not yet finished (the end-of-window check passes every end it knows)."""
    scheduled, end = np.asarray(scheduled, dtype=float), np.asarray(end, dtype=float)
    tokens = np.asarray(tokens, dtype=float)
    # only what had ended by `now`: with the later ends (the end-of-window check has them), at
    # 3x overload the lives passed `now` itself (an arrival at a ends at 3a and lived 2a) and
    # the end-of-window check had no window left
    finished = np.isfinite(end) & (end <= now)
    if not finished.any():
        return Saturation(False, "backlog", "no request finished yet")
    # the fill: 9 in 10 requests lived at most this long (an unfinished one counts its age, a
    # lower bound). Past it, an empty system still filling gains at most a tenth of its
    # arrivals, under the materiality floor. A saturated one keeps the window open: at 2x
    # capacity a request that arrived at a lives about a, so 9 in 10 lived < 0.45 x `now`,
    # and from 18 s on the window is the last 10 s whatever the check's time.
    seen = scheduled <= now
    lives = np.where(finished, end, now)[seen] - scheduled[seen]
    fill = float(np.quantile(lives, 1.0 - rule.min_growth_fraction))
    first = float(scheduled.min())
    # growth (λ - μ) W against the noise sqrt((λ + μ) W) at z: λW >= z² r (r + 1) / (r - 1)²
    # arrivals for an overload r = λ / μ, i.e. 54 at 2x, 135 at 1.5x: min_arrivals covers 2x
    rate = scheduled.size / max(now - first, 1e-9)
    length = max(rule.window_s, rule.min_arrivals / rate)
    start = max(first + fill, now - length)
    if now - start < rule.min_window_s:
        return Saturation(False, "backlog", f"window {now - start:.1f} s shorter than "
                          f"{rule.min_window_s:.1f} s", start=start, end=now)
    arrivals = int(((scheduled >= start) & (scheduled <= now)).sum())
    if arrivals < rule.min_points:
        return Saturation(False, "backlog", f"{arrivals} arrivals in the window, fewer than "
                          f"{rule.min_points}", start=start, end=now)
    times = np.linspace(start, now, BACKLOG_SAMPLES)
    arrived = np.searchsorted(np.sort(scheduled), times, side="right")
    ends = end[finished]
    done = np.searchsorted(np.sort(ends), times, side="right")
    backlog = (arrived - done).astype(float)
    completions = int(((ends >= start) & (ends <= now)).sum())
    floor = max(rule.min_rise_requests, rule.min_growth_fraction * arrivals)
    # bursty arrivals (a gamma schedule of shape k: gaps of squared CV 1/k) vary more than
    # Poisson counts: n arrivals by CV^2 n. At shape 0.25 and 95 % load the Poisson spread
    # flagged 7 of 10 healthy one-minute cells (4 servers x 0.2 s); never taken below Poisson
    gaps = np.diff(np.sort(scheduled[seen]))
    cv2 = float(gaps.var() / gaps.mean() ** 2) if gaps.size > 1 and gaps.mean() > 0 else 1.0
    return _fit("backlog", times, backlog, start, now, ends, np.nan_to_num(tokens[finished]),
                floor, rule, count_sd=float(np.sqrt(max(cv2, 1.0) * arrivals + completions)))
