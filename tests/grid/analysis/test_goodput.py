from __future__ import annotations

import numpy as np

from grid.analysis.goodput import Slo, good_requests


def _good(slo, ok, ttft, tpot, e2e, n):
    return good_requests(np.array(ok), np.array(ttft, dtype=float), np.array(tpot, dtype=float),
                         np.array(e2e, dtype=float), np.array(n, dtype=float), slo).tolist()


def test_each_set_slo_must_hold_with_less_or_equal():
    slo = Slo(ttft_ms=200, tpot_ms=20)
    # ttft 0.2 s == 200 ms meets (<=); 0.201 misses; tpot 0.021 misses; e2e ignored (unset)
    assert _good(slo, [True, True, True, True], [0.2, 0.201, 0.1, 0.1],
                 [0.02, 0.01, 0.021, 0.01], [9, 9, 9, 99], [10, 10, 10, 10]) == [
        True, False, False, True]


def test_failed_requests_are_never_good_and_single_token_tpot_is_zero():
    slo = Slo(tpot_ms=1, e2e_ms=500)
    assert _good(slo, [False, True, True], [0.1, 0.1, 0.1], [0.0, np.nan, 0.5],
                 [0.2, 0.4, 0.6], [5, 1, 1]) == [False, True, False]


def test_no_slo_counts_every_success():
    assert _good(Slo(), [True, False], [9.0, 0.1], [9.0, 0.1], [9.0, 0.1], [3, 3]) == [
        True, False]
