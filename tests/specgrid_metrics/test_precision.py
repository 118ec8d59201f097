"""The stopping rule (specgrid_metrics/precision.py) on constructed closed-loop streams: where a
cell checked every second would stop, against stop points computed by hand or from a normal
approximation of the ratio estimator's standard error (computed here, not by the code under
test)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specgrid_metrics import precision
from specgrid_metrics.intervals import RequestArrays
from specgrid_metrics.precision import Target, parse_targets

TOKENS = 100


def one_stream(e2e: list[float], ttft_share: float = 0.1) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """One closed-loop stream: requests back to back (sent, e2e, ttft)."""
    e2e_a = np.asarray(e2e, dtype=float)
    sent = np.concatenate([[0.0], np.cumsum(e2e_a)[:-1]])
    return sent, e2e_a, ttft_share * e2e_a


def view(sent: np.ndarray, e2e: np.ndarray, ttft: np.ndarray, t: float
         ) -> tuple[RequestArrays, np.ndarray]:
    """What the load generator sees at time t: the requests sent by then, finished ones whole,
    running ones with the tokens streamed so far (evenly between first token and end)."""
    s = sent <= t
    end = sent + e2e
    done = end <= t
    first = sent + ttft
    with np.errstate(invalid="ignore", divide="ignore"):
        so_far = np.where(t >= first, 1 + (TOKENS - 1) * np.clip((t - first) / (end - first),
                                                                 0, 1), 0.0)
    req = RequestArrays(sent[s], np.where(t >= first, ttft, np.nan)[s],
                        np.where(done, (e2e - ttft) / (TOKENS - 1), np.nan)[s],
                        np.where(done, e2e, np.nan)[s], np.where(done, TOKENS, np.nan)[s],
                        done[s])
    return req, np.floor(so_far[s])


def first_stop(sent, e2e, ttft, targets, cap: int, step: float = 1.0, offset: float = 0.5
               ) -> tuple[int | None, precision.Check | None]:
    """Requests issued when the rule first holds, checking at offset, offset + step, ...
    while fewer than `cap` requests were sent; None if never (the cap)."""
    result = None
    t = offset
    while True:
        req, so_far = view(sent, e2e, ttft, t)
        if len(req) >= cap and np.isfinite(req.e2e).all():
            return None, result
        projected = precision.as_if_stopped(req, so_far, t, 1, True)
        if projected is not None:
            result = precision.check(projected[0], targets, 1, True, 1000, 7,
                                     window=projected[1])
            if result.met:
                return len(req), result
        t += step


def relative_half_width_normal(e2e: np.ndarray) -> float:
    """1.96 x the relative standard error of the ratio estimator Σ tokens / Σ busy over
    finished requests of TOKENS tokens each (first-order, delta method)."""
    tok = np.full(e2e.size, float(TOKENS))
    rate = tok.sum() / e2e.sum()
    resid = tok - rate * e2e
    se = math.sqrt((resid ** 2).sum() / (e2e.size * (e2e.size - 1))) / e2e.mean()
    return 1.96 * se / rate


def test_identical_requests_stop_once_ten_lived_inside_the_window() -> None:
    # 1 s requests back to back. At the check t = k + 0.5, k + 1 were sent and the window
    # [first send, last send = k] holds the k finished ones; all alike, so the interval has
    # no width and only the 10-request floor holds the cell: it stops at t = 10.5, 11 sent.
    sent, e2e, ttft = one_stream([1.0] * 60)
    n, result = first_stop(sent, e2e, ttft, parse_targets({"metric": "output_tok_s",
                                                           "half_width": 0.05}), cap=60)
    assert n == 11
    assert result is not None and result.widths["output_tok_s"] == 0.0
    assert result.samples["output_tok_s"] == 10


def test_alternating_requests_never_get_tight_and_reach_the_cap() -> None:
    # 0.5 s and 2 s requests of 100 tokens alternate (200 and 50 tok/s): the ratio estimate is
    # 80 tok/s and every residual is ±60 tokens, so the normal approximation's half-width is
    # 1.96 x 0.6 / sqrt(n - 1): ±18.8 % at 40 requests, ±5 % only beyond 550.
    e2e_list = [0.5, 2.0] * 20
    sent, e2e, ttft = one_stream(e2e_list)
    targets = parse_targets({"metric": "output_tok_s", "half_width": 0.05})
    n, result = first_stop(sent, e2e, ttft, targets, cap=40)
    assert n is None  # never met before the cap
    assert result is not None
    expected = relative_half_width_normal(np.asarray(e2e_list[:result.samples["output_tok_s"]]))
    assert expected > 0.15
    assert 0.6 * expected < result.widths["output_tok_s"] < 1.6 * expected
    words = precision.describe_result(targets, result, reached=False)
    assert words.startswith("precision not reached: output_tok_s ±") and "target ±5 %" in words


def test_noisy_start_then_steady_stops_where_the_normal_approximation_says() -> None:
    noisy = [0.5, 2.0] * 5
    e2e_list = noisy + [1.0] * 200
    sent, e2e, ttft = one_stream(e2e_list)
    n, result = first_stop(sent, e2e, ttft, parse_targets({"metric": "output_tok_s",
                                                           "half_width": 0.05}), cap=210)
    # independent: the first count of finished requests at which 1.96 x the relative SE is
    # within ±5 % (the requests in flight at a check add one more to those sent)
    expected = next(m for m in range(10, len(e2e_list))
                    if relative_half_width_normal(np.asarray(e2e_list[:m])) <= 0.05) + 1
    assert n is not None and result is not None
    assert abs(n - expected) <= max(3, 0.2 * expected), (n, expected)
    assert n > 11  # later than the identical-request stream: the noisy start costs requests


def test_running_requests_count_with_what_they_streamed() -> None:
    # Two streams, 2 s requests of 100 tokens, stream B 1 s behind A: sends at 0, 1, 2, 3, 4.
    # At t = 4.5 the window is [1, 4] (the 2nd send to the last). Inside it: A's [2, 4]
    # (100 tokens) and B's [1, 3] (first token at 1.2: all 100 inside); A's [0, 2] streams
    # 99 tokens evenly over [0.2, 2], 99 x 1 / 1.8 = 55 of them after t = 1; B's running
    # [3, 5] has streamed up to 4.5 but only [3.2, 4] is inside: its first token and 99 x 0.8
    # / 1.8 = 44 more; A's running [4, 6] adds nothing. (100 + 100 + 55 + 45) / 3 s.
    sent = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    e2e = np.full(5, 2.0)
    ttft = np.full(5, 0.2)
    t = 4.5
    done = sent + e2e <= t
    so_far = np.array([0, 0, 0, 1 + 99 * (t - 3.2) / 1.8, 1 + 99 * (t - 4.2) / 1.8])
    req = RequestArrays(sent, ttft, np.where(done, 1.8 / 99, np.nan), np.where(done, e2e, np.nan),
                        np.where(done, 100.0, np.nan), done)
    snapshot, win = precision.as_if_stopped(req, so_far, t, 2, True)
    assert (win.start, win.end) == (1.0, 4.0)
    from specgrid_metrics.intervals import cell_intervals

    row, _ = cell_intervals(snapshot, 2, True, 200, 1, window=win, metrics=("output_tok_s",))
    expected = (100 + 100 + 99 * 1.0 / 1.8 + 1 + 99 * 0.8 / 1.8) / 3.0
    assert row["output_tok_s"] == pytest.approx(expected)
    assert row["window_requests"] == 2  # running requests never count as inside


def test_no_window_before_every_stream_was_busy() -> None:
    req = RequestArrays(np.array([0.0, 0.1]), np.full(2, np.nan), np.full(2, np.nan),
                        np.full(2, np.nan), np.full(2, np.nan), np.zeros(2, bool))
    assert precision.as_if_stopped(req, np.zeros(2), 1.0, 4, True) is None


@pytest.mark.parametrize(("metric", "needed"), [
    ("output_tok_s", 10), ("req_s", 10),
    # TAIL_SAMPLES = 10 beyond the quantile on its rarer side: 10 / min(q, 1 - q)
    ("ttft_p50_s", 20), ("ttft_p90_s", 100), ("tpot_p99_s", 1000), ("e2e_p10_s", 100)])
def test_samples_a_target_needs(metric: str, needed: int) -> None:
    assert Target(metric, 0.1).min_samples == needed


def test_a_median_target_waits_for_twenty_requests_inside() -> None:
    # Identical requests: a zero-width interval from the start; the p50 target holds only
    # once 20 finished requests lie inside the window (21 sent at t = 20.5).
    sent, e2e, ttft = one_stream([1.0] * 60)
    n, result = first_stop(sent, e2e, ttft, parse_targets({"metric": "ttft_p50",
                                                           "half_width": 0.1}), cap=60)
    assert n == 21 and result is not None and result.samples["ttft_p50_s"] == 20


@pytest.mark.parametrize(("value", "message"), [
    ({"metric": "output_tok_s", "half_width": 0}, "must be a fraction in (0, 1)"),
    ({"metric": "output_tok_s", "half_width": 1.0}, "must be a fraction in (0, 1)"),
    ({"metric": "output_tok_s", "half_width": -0.1}, "must be a fraction in (0, 1)"),
    ({"metric": "latency", "half_width": 0.1}, "unknown metric 'latency'"),
    ({"metric": "ttft_p100", "half_width": 0.1}, "unknown metric 'ttft_p100'"),
    ({"metric": "output_tok_s"}, "must be {metric: NAME, half_width: FRACTION}"),
    ([{"metric": "req_s", "half_width": 0.1}, {"metric": "req_s", "half_width": 0.2}],
     "names a metric twice"),
])
def test_bad_targets_are_one_line(value, message: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        parse_targets(value)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_targets_normalise_percentile_names() -> None:
    assert parse_targets([{"metric": "ttft_p50", "half_width": 0.1},
                          {"metric": "output_tok_s", "half_width": 0.05}]) == (
        Target("ttft_p50_s", 0.1), Target("output_tok_s", 0.05))
    assert parse_targets(None) == ()


def test_a_miss_by_less_than_the_shown_digit_is_written_with_more_digits() -> None:
    targets = parse_targets({"metric": "output_tok_s", "half_width": 0.1})
    missed = precision.Check(False, {"output_tok_s": 0.10014}, {"output_tok_s": 90}, 96)
    assert precision.describe_result(targets, missed, reached=False) == \
        "precision not reached: output_tok_s ±10.01 % after 96 requests (target ±10 %)"
    met = precision.Check(True, {"output_tok_s": 0.0996}, {"output_tok_s": 90}, 96)
    assert precision.describe_result(targets, met, reached=True) == \
        "output_tok_s ±10.0 % after 96 requests (target ±10 %)"
