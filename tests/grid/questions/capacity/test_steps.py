"""The capacity search's steps (grid/questions/capacity/steps.py), worked by hand on the
lattice 1 2 4 8 16 32 64 (indices 0..6) with the SLO target 0.9.

The verdicts below use the exact (Clopper-Pearson) 95 % interval only where it has a closed
form: n of n requests within the SLOs: low end 0.025 ** (1 / n) (40 of 40: 0.912, meets; 10 of
10: 0.692, undecided); 0 of n: high end 1 - 0.025 ** (1 / n) (0 of 40: 0.088 and 0 of 6:
0.459, both below the cliff's 0.5; 0 of 2: 0.842, a miss but no cliff; 0 of 1: 0.975,
undecided)."""

from __future__ import annotations

from grid.analysis.capacity import Attainment
from grid.questions.capacity.steps import replay, result

LATTICE = (1, 2, 4, 8, 16, 32, 64)
MEETS = Attainment(40, 40)
MISSES = Attainment(0, 40)
FEW_ALL_GOOD = Attainment(10, 10)
"""Undecided with a point estimate of 100 %: holds."""
ONE_MISSED = Attainment(0, 1)
"""Undecided with a point estimate of 0 %: does not hold."""


def test_bracket_then_bisect_to_neighbours_and_flag_the_cliff():
    # Meets up to c=8, then c=16 serves none of 6: ends (1 holds, 64 does not) -> index
    # (0+6)//2 = 3 (c=8, holds) -> (3+6)//2 = 4 (c=16, does not) -> neighbours: capacity 8
    # after 4 cells; 8 meets and 16 misses, so the interval is c=8 .. c=8.
    att = {1: MEETS, 2: MEETS, 4: MEETS, 8: MEETS, 16: Attainment(0, 6), 32: MISSES,
           64: MISSES}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert [s.points for s in steps] == [(1, 64), (8,), (16,), ()]
    assert steps[-1].stop == "bracketed" and (steps[-1].low, steps[-1].high) == (8, 16)
    out = result(steps, att, LATTICE, 0.9)
    assert out["capacity"] == 8 and out["interval"] == [8, 8] and out["first_miss"] == 16
    assert (out["undecided"], out["unmeasured"]) == ([], 0)
    assert out["cells"] == 4 and out["cliff"] is True
    assert out["attainment"]["16"] == {"attainment": 0.0, "interval": [0.0, 0.4593],
                                       "good": 0, "requests": 6, "over_saturated": False,
                                       "verdict": "misses"}


def test_a_miss_whose_interval_reaches_half_is_no_cliff():
    # Same boundary, but c=16 missed with 2 of 2 requests: its interval's top 0.842 is below
    # 0.9 (a miss) but not below 0.5 (no cliff).
    att = {1: MEETS, 8: MEETS, 16: Attainment(0, 2), 64: MISSES}
    out = result(replay(LATTICE, att, max_cells=7, target=0.9), att, LATTICE, 0.9)
    assert (out["capacity"], out["first_miss"], out["cliff"]) == (8, 16, False)


def test_undecided_loads_steer_by_their_point_estimate_and_widen_the_interval():
    # c=8 is undecided at 100 % of 10 (holds: up), c=16 at 0 of 1 (does not hold: down): the
    # same steps as above, capacity 8. But neither is a verdict: the interval runs from the
    # highest load that meets (c=1) to the load below the first miss (c=64): c=32, with 8 and
    # 16 undecided and 2, 4 and 32 never measured; no cliff.
    att = {1: MEETS, 8: FEW_ALL_GOOD, 16: ONE_MISSED, 64: MISSES}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert [s.points for s in steps] == [(1, 64), (8,), (16,), ()]
    assert steps[-1].stop == "bracketed"
    assert steps[2].why == "bisect between c=8 (holds) and c=64 (does not)"
    out = result(steps, att, LATTICE, 0.9)
    assert (out["capacity"], out["interval"], out["first_miss"]) == (8, [1, 32], 64)
    assert (out["undecided"], out["unmeasured"], out["cliff"]) == ([8, 16], 3, False)


def test_an_undecided_top_that_holds_is_all_served_and_not_bracketed():
    att = {1: MEETS, 64: FEW_ALL_GOOD}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert steps[-1].stop == "all served" and steps[-1].low == 64
    out = result(steps, att, LATTICE, 0.9)
    # nothing misses: interval c=1 .. c=64 (the highest), 2..32 (5 loads) not measured
    assert (out["capacity"], out["interval"], out["undecided"]) == (64, [1, 64], [64])
    assert (out["unmeasured"], out["first_miss"], out["bracketed"]) == (5, None, False)


def test_the_ends_decide_alone():
    none = replay(LATTICE, {1: Attainment(0, 2), 64: MISSES}, max_cells=7, target=0.9)
    assert none[-1].stop == "none served" and none[-1].low is None and none[-1].high == 1
    every = replay(LATTICE, {1: MEETS, 64: MEETS}, max_cells=7, target=0.9)
    assert every[-1].stop == "all served" and every[-1].low == 64
    # an undecided lowest load whose point estimate misses: no load holds, and the interval
    # says how little that shows: none .. c=32 (below the miss at 64)
    att = {1: ONE_MISSED, 64: MISSES}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert steps[-1].stop == "none served"
    out = result(steps, att, LATTICE, 0.9)
    assert (out["capacity"], out["interval"], out["undecided"]) == (None, [None, 32], [1])


def test_an_over_saturated_load_does_not_hold_whatever_its_attainment():
    # c=64 held every request within the SLOs, but its cell was stopped over-saturated
    att = {1: MEETS, 64: Attainment(40, 40, over_saturated=True)}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert steps[-1].points == (8,) and steps[-1].high == 64


def test_the_next_step_waits_for_its_cells_and_the_budget_stops_it():
    att = {1: MEETS, 64: MISSES}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert steps[-1].points == (8,) and steps[-1].stop is None  # c=8 is still to measure
    spent = replay(LATTICE, {**att, 8: MEETS}, max_cells=3, target=0.9)
    assert spent[-1].stop == "budget" and (spent[-1].low, spent[-1].high) == (8, 64)
