"""The crossover search's outcome for its trace (search.json): the bracket and why it stopped
(grid/analysis/search.py `result`), the budget, and what the twin asked first predicted."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from grid.analysis.search import Step, prior_check, result
from grid.plan.search import SearchSetup


def search_result(setup: SearchSetup, steps: Sequence[Any]) -> dict:
    """The crossover search's outcome over its own steps (a threshold search's confirmation
    steps aside; its budget less the cells kept for them)."""
    crossing = [s for s in steps if isinstance(s, Step)]
    space = setup.space
    if setup.threshold is not None:
        space = dataclasses.replace(space, max_cells=space.max_cells - setup.threshold.reserve)
    out = result(space, crossing)
    out["max_cells"] = setup.space.max_cells
    if setup.prior is not None:
        out["prior"] = {"source": setup.prior.label, "path": setup.prior.path,
                        **prior_check(space.lattice, setup.prior.predicted,
                                      crossing[-1].speedups)}
    return out
