"""Depth 0 (speculation configured, no drafts) against the baseline over the lattice
(grid/questions/speculation/predict.py `zero_speedups`, `zero_json`), on hand-made costs."""

import numpy as np
import pytest

from grid.analysis.surface import Cost
from grid.questions.speculation.predict import zero_json, zero_speedups


def cost(b, k, value):
    return Cost(b, k, value, np.full(5, value))


def test_depth_zero_is_one_over_its_cost_interpolated_in_log_load():
    costs = {(1, 0): cost(1, 0, 1.25), (4, 0): cost(4, 0, 1.6), (1, 2): cost(1, 2, 1.5)}
    found = zero_speedups(costs, (1, 2, 4, 8))
    # c=1: 1 / 1.25 = 0.8; c=2 the log-middle: c = (1.25 + 1.6) / 2 = 1.425 -> 0.7018;
    # c=4: 1 / 1.6 = 0.625; c=8 beyond the loads measured: nothing extrapolated
    assert set(found) == {1, 2, 4}
    assert found[1] == pytest.approx((0.8, 0.8, 0.8))
    assert found[2][0] == pytest.approx(1 / 1.425)
    assert found[4][0] == pytest.approx(0.625)
    rows = {r["load"]: r for r in zero_json(costs, (1, 2, 4, 8), 0.0)}
    assert rows[2]["cost"] == pytest.approx(1.425) and not rows[2]["measured"]
    assert rows[1]["measured"] and rows[1]["verdict"] == "slower"
    # no spread between repeats stated: its sign does not count
    within = {r["load"]: r for r in zero_json(costs, (1, 2, 4, 8), None)}
    assert within[1]["verdict"] == "undetermined (within-run noise only)"
