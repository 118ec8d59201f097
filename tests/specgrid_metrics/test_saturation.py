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
    # the window: the last 10 s, but not before the fill: the time 9 in 10 requests lived
    # (an unfinished one its age). Request k arrives at 0.1 k and ends at 0.2 (k + 1): at
    # 12 s those that arrived by ~6 s lived 0.1 k + 0.2, the rest are 0 to 6 s old, so the
    # lives spread evenly over 0 to 6.1 s and 9 in 10 are under 5.5 s
    assert sat.end == 12.0 and sat.start == pytest.approx(5.5, abs=0.1)
    assert "backlog rising" in sat.reason
    assert '"signal": "backlog"' in sat.evidence(offset=1000.0)
    # the fill is 0.45 x now, the window 0.55 x now: never 5 s long before 9.1 s; the growth
    # (half the window's 5.5 x now arrivals) stands out of 3 x sqrt(arrivals + completions)
    # = 3 x sqrt(8.25 x now) from now = 9.8 s: first flagged at the 10.5 s check (the samples
    # are a step function of 0.1 s arrivals)
    flagged = [now for now in np.arange(0.5, 12.0, 0.5) if open_view(arrivals, ends,
                                                                      now).over_saturated]
    assert flagged[0] == 10.5 and flagged == list(np.arange(10.5, 12.0, 0.5))


def test_a_saturated_open_loop_is_flagged_at_every_check_from_its_first_on() -> None:
    # The same 2x overload for two minutes. Its backlog, sampled every 0.1 s: arrivals
    # 10 t, completions 5 t - 1, so 5 t + 1 (1, 6, 11, ... 601 at 120 s). A check at any
    # time after 18 s sees the last 10 s (the fill, 0.45 x now, is before it): 100
    # arrivals, 50 completions, a growth of 50 against 3 x sqrt(150) = 37 and the floor of
    # a tenth of the arrivals, 10. The level (350 at 70 s, 600 at 120 s) does not enter: a
    # rule that asked for a rise of half the window's median backlog let go at 25 s.
    arrivals = np.arange(0, 120, 0.1)
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    every = [open_view(arrivals, ends, now) for now in np.arange(10.5, 120.0, 0.5)]
    assert all(sat.over_saturated for sat in every), [s.reason for s in every
                                                      if not s.over_saturated][:3]
    late = open_view(arrivals, ends, now=119.5)
    assert late.start == pytest.approx(109.5) and late.rise == pytest.approx(50, abs=1)
    # at a cadence of its own (a busy client checks late and unevenly): still every check
    cadence = np.cumsum(np.random.default_rng(3).uniform(0.05, 9.0, 40)) + 10.5
    assert all(open_view(arrivals, ends, now).over_saturated for now in cadence[cadence < 120])
    # and at the end: the end-of-window check (at the last arrival, 119.9 s) gets every end,
    # the last at 240.2 s; the ones after 119.9 s count as running
    end_check = saturation.open_loop(arrivals, ends, np.full(arrivals.size, TOKENS), 119.9)
    assert end_check.over_saturated and end_check.rise == pytest.approx(50, abs=1)


def test_the_end_of_window_check_sees_a_heavy_overload() -> None:
    # 20 arrivals/s on a 5/s server for 40 s: request k (at 0.05 k) ends at 0.2 (k + 1), 4x
    # its arrival time. Counted with the ends still to come, the lives of the arrivals to 40 s
    # (0.15 k + 0.2: up to 120 s) put the fill past the last arrival and left no window. As
    # seen at 40 s: a backlog of 15 t, 150 over the last 10 s of 200 arrivals and 50 ends.
    arrivals = np.arange(0, 40, 0.05)
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    sat = saturation.open_loop(arrivals, ends, np.full(arrivals.size, TOKENS), 39.95)
    assert sat.over_saturated and sat.slope == pytest.approx(15.0, rel=0.02)


def test_a_short_burst_that_drains_is_not_flagged() -> None:
    # 2 arrivals/s on a 5/s server (0.2 s each), and from 30 to 33 s a burst of 20/s: the
    # backlog goes from 0 or 1 to 45 (15 more a second for 3 s) and drains at 3 a second
    # by 48 s. The window at 33 s spans 100 arrivals at the rate seen, 3.6/s: 27.5 s, of which
    # the burst is the last 3 s; a Theil-Sen slope is the median of the pairwise slopes, and
    # fewer than a quarter of the pairs have a point in the burst: slope 0. After it the
    # backlog falls.
    arrivals = np.sort(np.concatenate([np.arange(0, 60, 0.5), np.arange(30, 33, 0.05)]))
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    checks = [open_view(arrivals, ends, now) for now in np.arange(5.0, 60.0, 0.5)]
    assert not any(sat.over_saturated for sat in checks)
    assert checks[int((33.0 - 5.0) / 0.5)].slope == pytest.approx(0.0, abs=0.1)


def test_a_slow_rate_above_capacity_is_found_over_a_longer_window() -> None:
    # 1 arrival/s on a server of 2 s per request (0.5/s): the backlog grows 0.5 a second, and
    # the k-th request ends at 2 (k + 1), an E2E of k + 2 s. A 10 s window could not tell:
    # 10 arrivals, a growth of 5 against 3 x sqrt(15) = 12. The window spans 100 arrivals at
    # the rate seen (100 s), from the fill on: at 120 s the 60 finished requests lived 2 to
    # 61 s and the 61 running ones are 0 to 60 s old, 9 in 10 under 55 s, so the window is
    # [55, 120]: 65 arrivals, 32 completions, a growth of 33 against 3 x sqrt(97) = 30.
    arrivals = np.arange(0, 200, 1.0)
    ends = fifo(arrivals, np.full(arrivals.size, 2.0))
    assert not open_view(arrivals, ends, now=10.0).over_saturated
    sat = open_view(arrivals, ends, now=120.0)
    assert sat.over_saturated and sat.slope == pytest.approx(0.5, rel=0.05)


def test_open_loop_below_capacity_is_not_flagged() -> None:
    # 4/s on a 5/s server, deterministic: the backlog is 0 or 1 at every sample, no trend at
    # any check, nor at the end of the window.
    arrivals = np.arange(0, 60, 0.25)
    ends = fifo(arrivals, np.full(arrivals.size, 0.2))
    assert not any(open_view(arrivals, ends, now).over_saturated
                   for now in np.arange(5.0, 60.0, 0.5))
    assert not saturation.open_loop(arrivals, ends, np.full(arrivals.size, TOKENS),
                                    59.75).over_saturated


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
