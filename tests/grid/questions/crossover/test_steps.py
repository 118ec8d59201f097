"""The crossover search's steps (grid/questions/crossover/steps.py) on constructed noisy speedup
curves whose crossover is known. Every expected trace below is worked out by hand from the rules
in docs/search.md, on the lattice 1 2 3 4 6 8 11 16 23 32 45 64 91 128 181 256 (√2
steps from 1 to 256) with coarse levels 1 4 16 64 256."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from grid.analysis.depth import Throughput
from grid.analysis.search import coarse_levels, lattice, make_space
from grid.questions.crossover.steps import (
    ABOVE_RANGE,
    BELOW_RANGE,
    BRACKETED,
    BUDGET,
    Point,
    level_speedups,
    prior_check,
    prior_levels,
    replay,
)
from grid.questions.measure import Compared

LATTICE = (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
REPLICATES = 1000


def curve(speedup: Callable[[int], float], sigma: Callable[[int], float] = lambda c: 0.01,
          repeats: int = 3) -> dict[Point, Compared]:
    """Every point of the lattice measured: baseline 100 tok/s, the variant 100 x (1 + the
    speedup) exactly, each cell's bootstrap replicates spread by a relative `sigma` (seeded
    per point, so every repeat is an independent draw)."""
    out = {}
    for c in LATTICE:
        for r in range(repeats):
            rng = np.random.default_rng(1000 * c + r)
            s = sigma(c)
            base = 100.0 * (1 + s * rng.standard_normal(REPLICATES))
            var = 100.0 * (1 + speedup(c)) * (1 + s * rng.standard_normal(REPLICATES))
            out[(c, r)] = (Throughput(100.0, base), Throughput(100.0 * (1 + speedup(c)), var))
    return out


def space(max_cells: int = 64, max_repeats: int = 3):
    return make_space(1, 256, math.sqrt(2), 5, max_cells, max_repeats)


def points_by_step(steps) -> list[list[Point]]:
    return [list(s.points) for s in steps]


def test_lattice_and_coarse_levels():
    # 2^(k/2) for k = 0..16 rounded: 1 1.41 2 2.83 4 5.66 8 11.3 16 22.6 32 45.3 64 90.5 128
    # 181 256 -> 1 (twice) 2 3 4 6 8 11 16 23 32 45 64 91 128 181 256.
    assert lattice(1, 256, math.sqrt(2)) == LATTICE
    assert coarse_levels(LATTICE, 5) == (1, 4, 16, 64, 256)
    assert lattice(8, 20, 2.0) == (8, 16, 20)  # the top of the range is always a level


def test_level_speedup_averages_repeats():
    m = {(4, 0): (Throughput(100.0, np.full(10, 100.0)), Throughput(120.0, np.full(10, 120.0))),
         (4, 1): (Throughput(100.0, np.full(10, 100.0)), Throughput(140.0, np.full(10, 140.0)))}
    level = level_speedups(m, [(4, 0), (4, 1)])[4]
    assert level.repeats == 2
    assert level.speedup == pytest.approx(0.30)  # (120 + 140) / 2 / 100 - 1
    # No noise within a cell, but the repeats differ (+20 % and +40 %): the interval widens
    # to hold both (grid/analysis/repeats.py). Log deviations of 120, 140: ±0.0771, so the
    # variant's own variance is 0.0119 and the baseline's the pooled 0.0059 (2 degrees of
    # freedom, t = 4.303): the variant within 130 x exp(±0.332) = [93.5, 181], the baseline
    # within 100 x exp(±0.234) = [79.1, 126.4]; the ratio's interval inside their extremes.
    assert level.lo <= 0.2 and level.hi >= 0.4
    assert level.lo > 93.5 / 126.4 - 1 and level.hi < 181 / 79.1 - 1
    # One repeat: the cell's own replicates, unwidened.
    one = level_speedups(m, [(4, 0)])[4]
    assert one.lo == pytest.approx(0.20) and one.hi == pytest.approx(0.20)


def test_crossover_in_range_is_bisected_to_neighbouring_levels():
    # +30 % up to c=40, -30 % above: the crossover lies between 32 and 45.
    steps = replay(space(), curve(lambda c: 0.3 if c <= 40 else -0.3))
    # coarse 1 4 16 (all +); climb to 64 (-); bisect (16, 64) at 32 = √(16 x 64) (+);
    # bisect (32, 64) at 45 (nearest √2048 = 45.25) (-); 32 and 45 are neighbours.
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)], [(32, 0)],
                                     [(45, 0)], []]
    assert steps[-1].stop == BRACKETED
    assert steps[-1].bracket == (32, 45)
    assert steps[-1].cells_before == 12  # 6 points x (baseline + eagle3)
    assert steps[-1].signs == {1: "+", 4: "+", 16: "+", 32: "+", 45: "-", 64: "-"}


def test_crossover_below_the_range():
    steps = replay(space(), curve(lambda c: -0.2))
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], []]
    assert steps[-1].stop == BELOW_RANGE
    assert steps[-1].bracket == (None, 1)
    assert steps[-1].cells_before == 6


def test_crossover_above_the_range():
    steps = replay(space(), curve(lambda c: 0.2))
    # it pays everywhere: climb coarse level by coarse level to the top
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)], [(256, 0)], []]
    assert steps[-1].stop == ABOVE_RANGE
    assert steps[-1].bracket == (256, None)
    assert steps[-1].cells_before == 10


def test_no_crossover_no_difference_repeats_then_the_point_estimate_decides():
    # +0.1 % everywhere with replicates spread 5 %: every interval straddles 0. Each level is
    # measured 3 times (max_repeats), then its point estimate (+) decides and the search
    # climbs: 1 4 16 x3, 64 x3, 256 x3 = 15 points = 30 cells, no crossover within the range.
    steps = replay(space(), curve(lambda c: 0.001, lambda c: 0.05))
    assert points_by_step(steps) == [
        [(1, 0), (4, 0), (16, 0)], [(1, 1), (4, 1), (16, 1)], [(1, 2), (4, 2), (16, 2)],
        [(64, 0)], [(64, 1)], [(64, 2)], [(256, 0)], [(256, 1)], [(256, 2)], []]
    assert steps[-1].stop == ABOVE_RANGE
    assert steps[-1].cells_before == 30
    assert set(steps[-1].signs.values()) == {"+p"}  # decided by the point estimates only


def test_wide_interval_needs_a_repeat():
    # +30 % below 32, +5 % at 32, -30 % above. At 32 a cell's replicates spread 2.2 %: the
    # interval of one repeat is about ±1.96 x √2 x 2.2 % = ±6.1 % (straddles 0), of two
    # repeats ±4.3 % (excludes 0). So 32 is measured twice, and only 32.
    def speedup(c: int) -> float:
        return 0.3 if c < 32 else (0.05 if c == 32 else -0.3)

    steps = replay(space(), curve(speedup, lambda c: 0.022))
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)], [(32, 0)],
                                     [(32, 1)], [(45, 0)], []]
    assert steps[3].signs[32] == "?" and "straddles 0 at c=32" in steps[3].why
    assert steps[-1].stop == BRACKETED and steps[-1].bracket == (32, 45)
    assert steps[-1].cells_before == 14


def test_budget_exhaustion_is_stated():
    data = curve(lambda c: 0.3 if c <= 40 else -0.3)
    steps = replay(space(max_cells=8), data)
    # 6 cells (coarse), 8 (climb to 64); the bisection at 32 does not fit.
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)], []]
    assert steps[-1].stop == BUDGET
    assert steps[-1].bracket == (16, 64)
    assert "max_cells" in steps[-1].why and "8 of 8 cells" in steps[-1].why
    # A step that does not fit whole runs what fits: 4 cells = 2 of the 3 coarse points.
    partial = replay(space(max_cells=4), data)
    assert points_by_step(partial) == [[(1, 0), (4, 0)], []]
    assert "only 2 of 3" in partial[0].why and partial[-1].stop == BUDGET


def test_resume_replays_the_same_trace():
    data = curve(lambda c: 0.3 if c <= 40 else -0.3)
    full = replay(space(), data)
    chosen = [p for s in full for p in s.points]
    # A crash in step 3 (bisection at 32) before its cell committed: the replay from the
    # committed points gives steps 1-3 again, step 3 still to run.
    committed = {p: data[p] for p in chosen[:4]}
    resumed = replay(space(), committed)
    assert resumed == full[:3]
    assert not all(p in committed for p in resumed[-1].points)
    # The finished search from exactly the points it chose: the same trace, nothing new.
    again = replay(space(), {p: data[p] for p in chosen})
    assert again == full and again[-1].stop == BRACKETED and again[-1].points == ()


def test_more_points_per_step_trade_cells_for_steps():
    data = curve(lambda c: 0.3 if c <= 40 else -0.3)
    steps = replay(make_space(1, 256, math.sqrt(2), 5, 64, 3, points_per_step=3), data)
    # after the climb to 64 the bracket (16, 64) holds 23 32 45 (16 x 4^(t/4) for t = 1, 2, 3
    # = 22.6, 32, 45.3): one 4-section measures all three, and 32 (+), 45 (-) bracket it.
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)],
                                     [(23, 0), (32, 0), (45, 0)], []]
    assert "4-section at c=23, c=32, c=45" in steps[2].why
    assert steps[-1].stop == BRACKETED and steps[-1].bracket == (32, 45)
    assert steps[-1].cells_before == 14  # one point more than bisection, one step fewer
    # an undecided level gets its remaining repeats at once (3 in all): 1 4 16 flat at +0.1 %
    flat = replay(make_space(1, 256, math.sqrt(2), 5, 64, 3, points_per_step=3),
                  curve(lambda c: 0.001, lambda c: 0.05))
    assert points_by_step(flat)[1] == [(1, 1), (1, 2), (4, 1), (4, 2), (16, 1), (16, 2)]


def test_a_narrow_interval_around_zero_is_a_tie_without_repeats():
    # +0.1 % everywhere with replicates spread 1 %: one repeat's interval is about
    # ±1.96 x √2 x 1 % = ±2.8 %, straddling 0 but within ±5 %: a tie, its point estimate (+)
    # decides at once, so the search climbs without repeats: 1 4 16, 64, 256 = 10 cells.
    flat = curve(lambda c: 0.001, lambda c: 0.01)
    steps = replay(make_space(1, 256, math.sqrt(2), 5, 64, 3, min_effect=0.05), flat)
    assert points_by_step(steps) == [[(1, 0), (4, 0), (16, 0)], [(64, 0)], [(256, 0)], []]
    assert steps[-1].stop == ABOVE_RANGE and steps[-1].cells_before == 10
    assert set(steps[-1].signs.values()) == {"+p"}
    # without min_effect the same levels are repeated first
    assert points_by_step(replay(space(), flat))[1] == [(1, 1), (4, 1), (16, 1)]


# --------------------------------------------------------------------------- a prior
def prior_space(predicted: list[float], max_cells: int = 64):
    import dataclasses

    return dataclasses.replace(space(max_cells), first=prior_levels(LATTICE, predicted),
                               prior="a twin")


def test_prior_levels_are_the_predicted_crossovers_neighbours():
    # predicted to pay up to 32 and lose from 45 on: measure 32 and 45 first
    assert prior_levels(LATTICE, [0.3 if c <= 32 else -0.1 for c in LATTICE]) == (32, 45)
    # pays everywhere: the top; nowhere: the bottom
    assert prior_levels(LATTICE, [0.1] * len(LATTICE)) == (256,)
    assert prior_levels(LATTICE, [-0.1] * len(LATTICE)) == (1,)


def test_a_right_prior_brackets_the_crossover_in_one_step():
    # +30 % up to c=40, -30 % above (as test_crossover_in_range_is_bisected...: 6 points in
    # 5 steps without a prior); the prior says between 32 and 45: two points, then bracketed
    steps = replay(prior_space([0.2 if c <= 32 else -0.2 for c in LATTICE]),
                   curve(lambda c: 0.3 if c <= 40 else -0.3))
    assert points_by_step(steps) == [[(32, 0), (45, 0)], []]
    assert steps[0].why == "the levels the prior (a twin) points to: c=32, c=45"
    assert steps[-1].stop == BRACKETED and steps[-1].bracket == (32, 45)
    assert steps[-1].cells_before == 4


def test_a_prior_that_is_too_high_descends_and_one_too_low_climbs():
    # truth: pays up to 6 (crossover between 6 and 8); the prior says between 64 and 91:
    # both lose, so the search descends coarse level by coarse level (16, 4: pays), then
    # bisects (4, 16) at 8 (-) and (4, 8) at 6 (+): bracketed between 6 and 8
    low = replay(prior_space([0.2 if c <= 64 else -0.2 for c in LATTICE]),
                 curve(lambda c: 0.3 if c <= 6 else -0.3))
    assert points_by_step(low) == [[(64, 0), (91, 0)], [(16, 0)], [(4, 0)], [(8, 0)], [(6, 0)],
                                   []]
    assert low[1].why == "stops paying already at c=64: descend to the next coarse level c=16"
    assert low[-1].stop == BRACKETED and low[-1].bracket == (6, 8)
    # truth: pays up to 128; the prior says between 4 and 6: both pay, climb to 16, 64, 256
    # (-), then bisect (64, 256) at 128 (+) and (128, 256) at 181 (-)
    high = replay(prior_space([0.2 if c <= 4 else -0.2 for c in LATTICE]),
                  curve(lambda c: 0.3 if c <= 128 else -0.3))
    assert points_by_step(high) == [[(4, 0), (6, 0)], [(16, 0)], [(64, 0)], [(256, 0)],
                                    [(128, 0)], [(181, 0)], []]
    assert high[-1].stop == BRACKETED and high[-1].bracket == (128, 181)
    # it loses from the bottom on: the prior's bottom level, then below_range at once
    below = replay(prior_space([-0.2] * len(LATTICE)), curve(lambda c: -0.2))
    assert points_by_step(below) == [[(1, 0)], []] and below[-1].stop == BELOW_RANGE


def test_the_prior_is_checked_against_what_the_search_measured():
    predicted = [0.2 if c <= 32 else -0.2 for c in LATTICE]
    steps = replay(prior_space(predicted), curve(lambda c: 0.3 if c <= 40 else -0.3))
    check = prior_check(LATTICE, predicted, steps[-1].speedups)
    assert check["predicted_bracket"] == [32, 45] and check["first"] == [32, 45]
    # measured +30 % at 32 and -30 % at 45 (1 % spread per cell: intervals about +-3 %),
    # predicted +20 % and -20 %: 10 points off at each, outside both intervals
    assert [(r["load"], r["predicted"], r["measured"], r["inside"]) for r in check["levels"]] \
        == [(32, 0.2, 0.3, False), (45, -0.2, -0.3, False)]
    assert check["mean_abs_error"] == pytest.approx(0.1)
