from __future__ import annotations

import numpy as np
import pytest

from specgrid_metrics.window import ended_inside, inside, steady_window, tokens_in_window


def test_closed_loop_window_opens_when_all_streams_are_busy_and_closes_at_the_last_send():
    # 2 streams; stream A: [0,4] [4,8] [8,12]; stream B starts late: [1,5] [5,9] [9,13].
    sent = np.array([0, 1, 4, 5, 8, 9], dtype=float)
    end = sent + 4
    w = steady_window(sent, end, concurrency=2, closed_loop=True)
    assert (w.start, w.end, w.steady) == (1.0, 9.0, True)
    assert w.ramp_s == 1.0 and w.drain_s == 4.0 and w.length_s == 8.0
    # lived entirely inside: [1,5], [4,8], [5,9]
    assert inside(sent, end, w).tolist() == [False, True, True, True, False, False]
    assert ended_inside(end, w).tolist() == [True, True, True, True, False, False]


def test_open_loop_window_is_the_arrival_period():
    sent = np.array([10.0, 10.5, 11.0, 13.0])
    w = steady_window(sent, sent + 2.0, concurrency=None, closed_loop=False)
    assert (w.start, w.end, w.ramp_s, w.drain_s) == (10.0, 13.0, 0.0, 2.0)


def test_one_wave_has_no_steady_part():
    sent = np.array([0.0, 0.0, 0.0])
    w = steady_window(sent, np.array([3.0, 4.0, np.nan]), concurrency=4, closed_loop=True)
    assert not w.steady and (w.start, w.end) == (0.0, 4.0)


def test_tokens_in_window_spreads_decode_tokens_evenly():
    w = steady_window(np.array([0.0, 10.0]), np.array([20.0, 20.0]), 1, True)  # [0, 10]
    # one request: sent 0, first token at 2 (1 token), 8 more tokens evenly over [2, 18]
    got = tokens_in_window(np.array([0.0]), np.array([2.0]), np.array([18.0]),
                           np.array([9]), w)
    assert got[0] == pytest.approx(1 + 8 * (10 - 2) / 16)
    # an error without timing counts nothing
    assert tokens_in_window(np.array([0.0]), np.array([np.nan]), np.array([np.nan]),
                            np.array([np.nan]), w)[0] == 0


def test_constant_rate_timeline_gives_the_true_throughput():
    # 4 streams, each request: 100 tokens, TTFT 0.1 s, 1.0 s total, back to back, 10 waves.
    c, waves = 4, 10
    sent = np.repeat(np.arange(waves, dtype=float), c) + np.tile(np.arange(c) * 0.01, waves)
    ttft, e2e = np.full(sent.size, 0.1), np.full(sent.size, 1.0)
    w = steady_window(sent, sent + e2e, c, True)
    tokens = tokens_in_window(sent, ttft, e2e, np.full(sent.size, 100), w).sum()
    assert tokens / w.length_s == pytest.approx(400.0, rel=0.01)  # 4 streams x 100 tok/s

