"""The one crossover of a speedup curve: where speculation stops paying along the load. Pure
Python (the analysis, the simulator's assumed interior and the benches all read it here)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def crossover_of(loads: Sequence[float] | Any, speedups: Sequence[float] | Any) -> float:
    """The load where the speedup (relative: 0 = the baseline's throughput) first falls to zero
    or below (NaN counts as not positive), interpolated linearly in log2(load) between the last
    level where it was positive and the first where it is not. -inf: not positive even at the
    lowest load; +inf: positive at every load. Sequences or numpy arrays alike (this package
    imports no numpy, hence `Any` beside `Sequence`)."""
    for i, s in enumerate(speedups):
        if s > 0:
            continue
        if i == 0:
            return -math.inf
        x0, x1 = math.log2(loads[i - 1]), math.log2(loads[i])
        s0 = float(speedups[i - 1])
        return float(2 ** (x0 + (x1 - x0) * s0 / (s0 - float(s))))
    return math.inf
