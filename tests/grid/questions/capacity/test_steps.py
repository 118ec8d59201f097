"""The capacity search's steps (grid/questions/capacity/steps.py), worked by hand on the
lattice 1 2 4 8 16 32 64 (indices 0..6) with the SLO target 0.9."""

from __future__ import annotations

from grid.questions.capacity.steps import replay, result

LATTICE = (1, 2, 4, 8, 16, 32, 64)


def test_bracket_then_bisect_to_neighbours_and_flag_the_cliff():
    # Meets up to c=8, then 16 serves only 30 %: ends (1 meets, 64 misses) -> index (0+6)//2
    # = 3 (c=8, meets) -> (3+6)//2 = 4 (c=16, misses) -> neighbours: capacity 8 after 4 cells.
    att = {1: 0.99, 2: 0.99, 4: 0.98, 8: 0.95, 16: 0.30, 32: 0.05, 64: 0.0}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert [s.points for s in steps] == [(1, 64), (8,), (16,), ()]
    assert steps[-1].stop == "bracketed" and (steps[-1].low, steps[-1].high) == (8, 16)
    out = result(steps, att, LATTICE)
    assert out["capacity"] == 8 and out["interval"] == [8, 16] and out["cells"] == 4
    assert out["cliff"] is True


def test_a_gentle_boundary_is_no_cliff():
    # Same boundary, but c=16 still serves 85 % (>= 0.5): a miss, not a cliff.
    att = {1: 0.99, 8: 0.95, 16: 0.85, 64: 0.2}
    out = result(replay(LATTICE, att, max_cells=7, target=0.9), att, LATTICE)
    assert (out["capacity"], out["cliff"]) == (8, False)


def test_the_ends_decide_alone():
    none = replay(LATTICE, {1: 0.5, 64: 0.0}, max_cells=7, target=0.9)
    assert none[-1].stop == "none served" and none[-1].low is None
    every = replay(LATTICE, {1: 1.0, 64: 0.95}, max_cells=7, target=0.9)
    assert every[-1].stop == "all served" and every[-1].low == 64


def test_the_next_step_waits_for_its_cells_and_the_budget_stops_it():
    att = {1: 0.99, 64: 0.0}
    steps = replay(LATTICE, att, max_cells=7, target=0.9)
    assert steps[-1].points == (8,) and steps[-1].stop is None  # c=8 is still to measure
    spent = replay(LATTICE, {**att, 8: 0.99}, max_cells=3, target=0.9)
    assert spent[-1].stop == "budget" and (spent[-1].low, spent[-1].high) == (8, 64)
