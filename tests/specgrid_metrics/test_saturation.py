"""The over-saturation detector (specgrid_metrics/saturation.py) on constructed timestamp
series: queues that grow (expected slopes worked out by hand) and queues that do not."""

from __future__ import annotations

import numpy as np
import pytest

from specgrid_metrics import saturation

TOKENS = 50.0


def fifo(arrivals: np.ndarray, service: np.ndarray, servers: int = 1) -> np.ndarray:
    """End times of a FIFO queue with `servers` parallel servers (an independent simulation)."""
    free = [0.0] * servers
    ends = np.empty(arrivals.size)
    for i, (a, s) in enumerate(zip(arrivals, service, strict=True)):
        k = int(np.argmin(free))
        ends[i] = max(a, free[k]) + s
        free[k] = ends[i]
    return ends


def open_view(arrivals: np.ndarray, ends: np.ndarray, now: float) -> saturation.Saturation:
    seen = arrivals <= now
    end = np.where(ends[seen] <= now, ends[seen], np.nan)
    return saturation.open_loop(arrivals[seen], end, np.full(int(seen.sum()), TOKENS), now)


def test_open_loop_above_capacity_is_flagged_with_the_backlog_slope() -> None:
    # 10 arrivals/s on one server that takes 0.2 s each (5/s): the backlog grows by 10 - 5 =
    # 5 requests every second.
    arrivals = np.arange(0, 30, 0.1)
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    sat = open_view(arrivals, ends, now=12.0)
    assert sat.over_saturated and sat.signal == "backlog"
    assert sat.slope == pytest.approx(5.0, rel=0.05)
    assert sat.throughput_ratio == pytest.approx(1.0, abs=0.1)  # the server at its 5/s
    # the window: the last 10 s, but not before one median E2E of the finished requests
    # (those that arrived by ~6 s: 0.2 s + their wait, about half their arrival time) after
    # the first arrival
    assert sat.end == 12.0 and 2.0 < sat.start < 4.0
    assert "backlog rising" in sat.reason
    assert '"signal": "backlog"' in sat.evidence(offset=1000.0)
    # the shortest window is 5 s, and it opens one median E2E after the first arrival (the
    # fill of an empty system): never flagged before 5 s; at 8 s the window [~1.2, 8] holds
    # 68 arrivals and 34 completions, a growth of 34 against 3 x sqrt(102) = 30
    assert not any(open_view(arrivals, ends, now).over_saturated
                   for now in np.arange(0.5, 5.0, 0.5))
    assert open_view(arrivals, ends, now=8.0).over_saturated


def test_a_slow_rate_above_capacity_is_found_over_a_longer_window() -> None:
    # 1 arrival/s on a server of 2 s per request (0.5/s): the backlog grows 0.5 a second, and
    # the k-th request ends at 2 (k + 1), an E2E of k + 2 s. A 10 s window could not tell:
    # 10 arrivals, a growth of 5 against 3 x sqrt(15) = 12. The window spans 100 arrivals at
    # the rate seen (100 s), from one median E2E on: at 120 s the 60 finished requests have a
    # median E2E of ~32 s, so the window is [32, 120]: 88 arrivals, 44 completions, a growth
    # of 44 against 3 x sqrt(132) = 34.
    arrivals = np.arange(0, 200, 1.0)
    ends = fifo(arrivals, np.full(arrivals.size, 2.0))
    assert not open_view(arrivals, ends, now=10.0).over_saturated
    sat = open_view(arrivals, ends, now=120.0)
    assert sat.over_saturated and sat.slope == pytest.approx(0.5, rel=0.05)


def test_open_loop_below_capacity_is_not_flagged() -> None:
    # 4/s on a 5/s server, deterministic: at most one request waits; no trend at any time.
    arrivals = np.arange(0, 60, 0.25)
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    assert not any(open_view(arrivals, ends, now).over_saturated
                   for now in np.arange(5.0, 60.0, 0.5))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("load", [0.8, 0.95])
def test_a_busy_but_stable_poisson_queue_is_not_flagged(seed: int, load: float) -> None:
    # M/M/4 at 80 and 95 % load (4 servers of 0.2 s mean): a noisy, bursty backlog with no
    # trend, checked every half second for a minute.
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(0.2 / (4 * load), 1400))
    ends = fifo(arrivals, rng.exponential(0.2, arrivals.size), servers=4)
    flagged = [now for now in np.arange(5.0, 60.0, 0.5) if open_view(arrivals, ends,
                                                                       now).over_saturated]
    assert flagged == []


def closed(ttft_of, concurrency: int, decode_s: float, until: float, seed: int = 0
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`concurrency` streams, back to back: a request sent at t waits ttft_of(t, rng) for its
    first token and then decodes for decode_s. Returns (sent, ttft, end) of all requests."""
    rng = np.random.default_rng(seed)
    sent, ttft, end = [], [], []
    for s in range(concurrency):
        t = s * 0.01
        while t < until:
            wait = ttft_of(t, rng)
            sent.append(t), ttft.append(wait), end.append(t + wait + decode_s)
            t = end[-1]
    order = np.argsort(sent)
    return np.asarray(sent)[order], np.asarray(ttft)[order], np.asarray(end)[order]


def closed_view(sent, ttft, end, now: float, concurrency: int) -> saturation.Saturation:
    seen = sent <= now
    first_known = np.where(sent[seen] + ttft[seen] <= now, ttft[seen], np.nan)
    done = np.where(end[seen] <= now, end[seen], np.nan)
    return saturation.closed_loop(sent[seen], first_known, done, np.full(int(seen.sum()),
                                                                         TOKENS), now,
                                  concurrency)


def test_closed_loop_ttft_rising_while_throughput_flat_is_flagged() -> None:
    # TTFT = 0.05 s + 0.2 s per second of the cell (a server queue filling), decode 1 s: the
    # slope is 0.2 s/s by construction; requests take longer, so throughput falls (flat or
    # lower counts as flat: the server is not speeding up).
    sent, ttft, end = closed(lambda t, rng: 0.05 + 0.2 * t, concurrency=16, decode_s=1.0,
                             until=40.0)
    sat = closed_view(sent, ttft, end, now=20.0, concurrency=16)
    assert sat.over_saturated and sat.signal == "ttft"
    assert sat.slope == pytest.approx(0.2, rel=0.05)
    assert sat.throughput_ratio <= 1.1
    assert "TTFT rising" in sat.reason


def test_closed_loop_at_a_steady_state_is_not_flagged() -> None:
    # TTFT around 0.3 s with 30 % noise and no trend, 16 streams, checked every 0.5 s.
    sent, ttft, end = closed(lambda t, rng: 0.3 * max(0.1, 1 + 0.3 * rng.standard_normal()),
                             concurrency=16, decode_s=1.5, until=60.0)
    flagged = [now for now in np.arange(1.0, 60.0, 0.5)
               if closed_view(sent, ttft, end, now, 16).over_saturated]
    assert flagged == []


def test_ttft_rising_while_throughput_rises_is_a_ramp_not_saturation() -> None:
    # TTFT rises 0.02 s/s but requests get shorter (decode from 3 s to 0.5 s): tokens per
    # second grow (by ~25 % from one half of the window to the other), so the server is
    # speeding up, not queueing.
    rng = np.random.default_rng(1)
    sent, ttft, end = [], [], []
    for s in range(8):
        t = s * 0.01
        while t < 30.0:
            wait = 0.05 + 0.02 * t
            decode = max(0.5, 3.0 - 0.1 * t) * (1 + 0.01 * rng.standard_normal())
            sent.append(t), ttft.append(wait), end.append(t + wait + decode)
            t = end[-1]
    order = np.argsort(sent)
    sat = closed_view(np.asarray(sent)[order], np.asarray(ttft)[order], np.asarray(end)[order],
                      now=20.0, concurrency=8)
    assert not sat.over_saturated
    assert "throughput rising" in sat.reason


def test_too_short_a_window_is_never_flagged() -> None:
    sent, ttft, end = closed(lambda t, rng: 0.05 + 0.5 * t, concurrency=4, decode_s=0.5,
                             until=10.0)
    sat = closed_view(sent, ttft, end, now=3.0, concurrency=4)
    assert not sat.over_saturated and "shorter than" in sat.reason
