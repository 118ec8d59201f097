"""The one crossover of a speedup curve (specgrid_metrics/crossover.py), hand-worked."""

import math

import numpy as np
import pytest

from specgrid_metrics.crossover import crossover_of


def test_the_crossover_interpolates_in_log2_of_the_load():
    # +10 % at c=1, -10 % at c=2: halfway in log2 between 1 and 2 is sqrt(2)
    assert crossover_of((1, 2, 4), (0.1, -0.1, -0.3)) == pytest.approx(math.sqrt(2))
    # +30 % at 2, -10 % at 8: three quarters of log2(2)..log2(8) = 2.5 -> 2**2.5
    assert crossover_of((1, 2, 8), (0.5, 0.3, -0.1)) == pytest.approx(2 ** 2.5)
    # +10 % at 4, -10 % at 8 on numpy arrays: halfway, 2**2.5 again
    loads = np.array([1.0, 2, 4, 8, 16])
    assert crossover_of(loads, np.array([0.4, 0.3, 0.1, -0.1, -0.3])) == pytest.approx(2 ** 2.5)


def test_a_curve_that_never_crosses_or_starts_below():
    assert crossover_of((1, 2), (0.1, 0.2)) == math.inf
    assert crossover_of((1, 2), (-0.1, -0.2)) == -math.inf
    # a later dip back above 0 does not move the first crossing
    assert crossover_of((1, 2, 4), (-0.1, 0.3, 0.1)) == -math.inf
    # NaN counts as not positive, and the interpolation towards it is not a number (the
    # analysis leaves such a bootstrap replicate out, grid/analysis/decision.py `crossovers`)
    assert math.isnan(crossover_of((1, 2), (0.1, math.nan)))
    assert crossover_of((1, 2), (math.nan, 0.2)) == -math.inf
