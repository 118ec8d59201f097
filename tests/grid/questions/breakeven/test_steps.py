"""The break-even search on a hand-worked surface (grid/questions/breakeven/steps.py): which
cells it measures, in which steps, and that the curve from them is the dense grid's."""

from __future__ import annotations

import pytest

from grid.analysis.breakeven import crossing
from grid.questions.breakeven.steps import (
    BASELINE,
    BreakevenSpace,
    chosen,
    replay,
)

LENGTHS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
# Baseline 100 tok/s everywhere; the variant 100 x a / a*(c): it pays exactly above a*(c) =
# 1.7, 2.2, 2.8 at c = 1, 2, 4, and at no length measured at c = 8 (a* = 4.5)
TRUE = {1: 1.7, 2: 2.2, 4: 2.8, 8: 4.5}
DENSE = {(c, i): 100.0 * LENGTHS[i] / a for c, a in TRUE.items() for i in range(len(LENGTHS))}
DENSE.update({(c, BASELINE): 100.0 for c in TRUE})
SPACE = BreakevenSpace(loads=(1, 2, 4, 8), lengths=LENGTHS, max_cells=40)


def test_the_steps_open_bisect_and_widen_as_worked_by_hand():
    steps = replay(SPACE, DENSE)
    assert [s.points for s in steps] == [
        [(1, BASELINE), (1, 0), (1, 6)],  # c=1: the ends (ratios 0.59, 2.35)
        [(1, 3)],  # bisect 0..6: 2.5 pays (1.47)
        [(1, 1)],  # bisect 0..3: 1.5 does not (0.88)
        [(1, 2)],  # bisect 1..3: 2.0 pays (1.18): bracket [1.5, 2.0]
        [(2, BASELINE), (2, 1), (2, 2)],  # c=2 opens at c=1's bracket: neither pays
        [(2, 3)],  # widen upwards one step: 2.5 pays (1.14)
        [(4, BASELINE), (4, 2), (4, 3)],  # c=4 opens at [2.0, 2.5]: neither pays
        [(4, 4)],  # 3.0 pays (1.07)
        [(8, BASELINE), (8, 3), (8, 4)],  # c=8 at [2.5, 3.0]: neither
        [(8, 5)],  # span 1: 3.5 (0.78)
        [(8, 6)],  # span 2 from 3..5, capped at the end: 4.0 (0.89): above
        [],
    ]
    assert steps[-1].stop == "resolved"
    assert steps[-1].brackets == {1: [1.5, 2.0, "inside"], 2: [2.0, 2.5, "inside"],
                                  4: [2.5, 3.0, "inside"], 8: [4.0, None, "above"]}
    assert len(chosen(steps)) == 19 and SPACE.dense_cells == 32


def test_the_curve_from_the_searched_cells_is_the_dense_grids():
    picked = set(chosen(replay(SPACE, DENSE)))

    def curve(cells, c):
        idx = sorted(i for (load, i) in cells if load == c and i != BASELINE)
        return crossing([LENGTHS[i] for i in idx],
                        [DENSE[(c, i)] / DENSE[(c, BASELINE)] for i in idx])

    for c, a in TRUE.items():
        searched, dense = curve(picked, c), curve(DENSE, c)
        assert searched == dense
        assert searched.value == pytest.approx(min(a, 4.0))


def test_a_budget_stops_the_search_with_what_fits():
    steps = replay(BreakevenSpace((1, 2, 4, 8), LENGTHS, max_cells=8), DENSE)
    assert len(chosen(steps)) == 8 and steps[-1].stop == "budget"
    assert steps[-2].points == [(2, BASELINE), (2, 1)]  # the step cut to what fits
    assert list(steps[-1].brackets) == [1]


def test_a_search_replayed_from_fewer_cells_stops_at_the_first_missing_one():
    some = {p: v for p, v in DENSE.items() if p[0] == 1}
    steps = replay(SPACE, some)
    assert steps[-1].points == [(2, BASELINE), (2, 1), (2, 2)] and steps[-1].stop is None
