"""The surface between measured cells: linear in k at a load, then linear in log B at a depth,
replicate by replicate; nothing outside the span measured."""

import numpy as np
import pytest

from grid.analysis.surface import Cost, interpolated


def cost(b, k, value, reps):
    return Cost(b, k, value, np.array(reps, dtype=float), (2.0,))


MEASURED = {(1, 1): cost(1, 1, 1.0, [1.0, 1.2]), (1, 5): cost(1, 5, 2.0, [2.0, 2.4]),
            (16, 1): cost(16, 1, 3.0, [3.0, 3.0]), (16, 5): cost(16, 5, 5.0, [5.0, 6.0])}


def test_a_measured_cost_is_kept_as_it_is():
    out = interpolated(MEASURED, (1, 16), (1, 5))
    assert out[(1, 5)] is MEASURED[(1, 5)]


def test_between_depths_the_cost_is_the_line_through_its_neighbours():
    out = interpolated(MEASURED, (1, 16), (1, 2, 3, 5))
    # k=2 at c=1: a quarter of the way from 1.0 to 2.0 -> 1.25; replicates 1.2 -> 2.4: 1.5
    assert out[(1, 2)].value == pytest.approx(1.25)
    np.testing.assert_allclose(out[(1, 2)].reps, [1.25, 1.5])
    # k=3 at c=16: halfway from 3.0 to 5.0 -> 4.0; replicates (3 + 6) / 2 = 4.5
    assert out[(16, 3)].value == pytest.approx(4.0)
    np.testing.assert_allclose(out[(16, 3)].reps, [4.0, 4.5])
    assert out[(16, 3)].lengths == ()  # interpolated, not measured at any length


def test_between_loads_the_cost_is_linear_in_log_load():
    out = interpolated(MEASURED, (1, 2, 4, 16), (1, 3))
    # c=4 is halfway from 1 to 16 in log2 (2 of 4): k=1 (1.0 + 3.0) / 2 = 2.0
    assert out[(4, 1)].value == pytest.approx(2.0)
    # c=2 a quarter of the way: k=1 1.0 + 0.25 x 2.0 = 1.5; k=3 (1.5 at c=1, 4.0 at c=16)
    # -> 1.5 + 0.25 x 2.5 = 2.125
    assert out[(2, 1)].value == pytest.approx(1.5)
    assert out[(2, 3)].value == pytest.approx(2.125)
    np.testing.assert_allclose(out[(4, 1)].reps, [2.0, 2.1])


def test_nothing_is_extrapolated_beyond_the_span_measured():
    out = interpolated(MEASURED, (1, 32), (1, 7))
    assert set(out) == {(1, 1)}  # k=7 lies beyond 5, c=32 beyond 16
