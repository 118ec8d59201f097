"""The threshold search's steps (grid/questions/threshold/__init__.py) on constructed speedup curves
whose crossover is known. Expected values are worked out by hand from docs/search.md's rules,
on the lattice 1 2 3 4 6 8 11 16 23 32 45 64 91 128 181 256 with coarse levels 1 4 16 64 256
and SGLang's speculative capture sizes below 256 as the honoured values."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from grid.analysis.depth import Throughput
from grid.analysis.search import Level, make_space
from grid.questions.crossover.steps import BELOW_RANGE, BUDGET
from grid.questions.measure import Compared
from grid.questions.threshold import (
    CONFIRMED,
    ThresholdConfirmStep,
    rank,
    replay_threshold,
    threshold_result,
    winner,
)
from tests.grid.questions.crossover.test_steps import LATTICE, REPLICATES

CAPTURED = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4))
            + list(range(72, 256, 8)))
"""SGLang 0.5.23's speculative capture list for max_bs 256, below 256 (adaptive.py)."""


def linear(cross: float, slope: float = 0.2) -> Callable[[float], float]:
    """A speedup falling by `slope` per doubling of load, zero at `cross`."""
    return lambda c: slope * (math.log2(cross) - math.log2(c))


def measure(base: float, var: float, sigma: float, seed: int) -> Compared:
    rng = np.random.default_rng(seed)
    return (Throughput(base, base * (1 + sigma * rng.standard_normal(REPLICATES))),
            Throughput(var, var * (1 + sigma * rng.standard_normal(REPLICATES))))


def crossing(speedup: Callable[[float], float], sigma: float = 0.01
             ) -> dict[tuple[int, int], Compared]:
    return {(c, r): measure(100.0, 100.0 * (1 + speedup(c)), sigma, 1000 * c + r)
            for c in LATTICE for r in range(3)}


def pairs_from(speedup: Callable[[float], float], sigma: float = 0.01):
    """A confirmation pair (a, b, r) measured as the model says: at c=b, the variant with
    threshold b drafts (1 + speedup(b)), the one with a does not (the baseline's 1.0)."""
    def one(pair: tuple[int, int, int]) -> Compared:
        a, b, r = pair
        return measure(100.0, 100.0 * (1 + speedup(b)), sigma, 7 * b + 13 * a + r)
    return one


def run_all(space, speedup, sigma=0.01, candidates=2, honoured=CAPTURED):
    """Replay, measuring each confirmation step's pairs, until the search stops."""
    measured, confirmed = crossing(speedup, sigma), {}
    measure_pair = pairs_from(speedup, sigma)
    for _ in range(50):
        steps = replay_threshold(space, 2 * (candidates - 1), honoured, candidates, measured,
                                 confirmed)
        if steps[-1].stop is not None:
            return steps
        for p in steps[-1].points:
            if len(p) == 3:
                confirmed[p] = measure_pair(p)
    raise AssertionError("the search did not stop")


def levels_of(speedups: dict[int, float]) -> dict[int, Level]:
    return {c: Level(c, 1, s, s - 0.01, s + 0.01) for c, s in speedups.items()}


def test_rank_by_regret_worked_by_hand():
    # Speedup +0.2 at c=16, -0.2 at c=64: linear in log2 load, zero at c=32 (the crossover,
    # interpolated as decision.crossover_of does). s(u) = 0.2 (5 - u) for u = log2 c in
    # [4, 6]. Regret of T = |integral from log2 T to 5 of s| = 0.1 (5 - log2 T)^2:
    # T=32: 0; T=28: 0.1 x (5 - 4.807)^2 = 0.0037; T=40: 0.1 x 0.322^2 = 0.0104;
    # T=16: 0.1; T=64: 0.1.
    ranked = rank(levels_of({16: 0.2, 64: -0.2}), [16, 28, 32, 40, 64], 16, 64)
    assert [c.value for c in ranked] == [32, 28, 40, 16, 64]
    assert [round(c.regret, 4) for c in ranked] == [0.0, 0.0037, 0.0104, 0.1, 0.1]
    # Outside [low, high]: not a candidate.
    assert [c.value for c in rank(levels_of({16: 0.2, 64: -0.2}), [8, 32, 128], 16, 64)] \
        == [32]


def test_rank_needs_a_finite_crossover():
    assert rank(levels_of({1: -0.1, 4: -0.2}), CAPTURED, 1, 256) == []   # never pays
    assert rank(levels_of({1: 0.3, 4: 0.2}), CAPTURED, 1, 256) == []     # always pays
    assert rank(levels_of({16: 0.1}), CAPTURED, 1, 256) == []            # one level


def test_winner_walks_up_while_the_higher_threshold_wins():
    assert winner([24, 28, 32], {"24->28": "+", "28->32": "-"}) == 28
    assert winner([24, 28, 32], {"24->28": "+p", "28->32": "+"}) == 32
    assert winner([24, 28, 32], {"24->28": "-p", "28->32": "+"}) == 24
    assert winner([24, 28], {}) == 24


def test_crossover_at_28_confirms_the_captured_size_below_it():
    # Zero at c=28. The crossover search brackets it between 23 and 32 (bracketed); the
    # interpolation between the lattice's +0.0574 at 23 and -0.0386 at 32 puts it at 28.0,
    # so 28 (regret ~0) and 30 rank first. The pair's cells at c=30 see the model's
    # speedup(30) = 0.2 x log2(28/30) = -0.020; with 0.5 % noise per cell the ratio's 95 %
    # interval is about ±1.4 %, below 0 at one repeat: 30 loses, 28 is the answer.
    steps = run_all(make_space(1, 256, math.sqrt(2), 5, 24, 3), linear(28), sigma=0.005)
    last = steps[-1]
    assert isinstance(last, ThresholdConfirmStep) and last.stop == CONFIRMED
    assert last.threshold == 28
    confirm = [s for s in steps if isinstance(s, ThresholdConfirmStep) and s.points]
    assert [list(s.points) for s in confirm] == [[(28, 30, 0)]]
    assert last.signs == {"28->30": "-"}
    res = threshold_result(steps)
    assert res["threshold"] == 28 and res["threshold_stop"] == CONFIRMED
    assert [c["value"] for c in res["candidates"][:2]] == [28, 30]


def test_crossover_at_31_the_higher_candidate_wins():
    # Zero at c=31: the pair (30, 32) at c=32 sees speedup(32) = -0.009 (below 0: 30), the
    # interpolated crossover sits at ~30.8, so 30 and 32 rank first; measured at c=32 the
    # variant with 32 loses by 0.9 % with ±1 % noise per cell: the interval straddles 0 but
    # lies within ±min_effect = 5 %: a tie decided by the point estimate, no repeat.
    sp = make_space(1, 256, math.sqrt(2), 5, 24, 3, min_effect=0.05)
    steps = run_all(sp, linear(31))
    last = steps[-1]
    assert last.stop == CONFIRMED and sorted(c.value for c in last.candidates[:2]) == [30, 32]
    assert last.signs["30->32"] in ("-", "-p") and last.threshold == 30


def test_a_wide_pair_interval_is_repeated_up_to_max_repeats():
    # 10 % noise per cell: the pair's interval at one repeat is far wider than ±5 %, so it is
    # repeated (one repeat per step) until max_repeats = 3, then decided by the point estimate.
    sp = make_space(1, 256, math.sqrt(2), 5, 40, 3, min_effect=0.05)
    measured = crossing(linear(28), 0.01)
    confirmed = {}
    pair = pairs_from(linear(28), 0.10)
    repeats = []
    for _ in range(10):
        steps = replay_threshold(sp, 2, CAPTURED, 2, measured, confirmed)
        if steps[-1].stop:
            break
        repeats.append([p[2] for p in steps[-1].points])
        for p in steps[-1].points:
            confirmed[p] = pair(p)
    assert repeats == [[0], [1], [2]]
    assert steps[-1].stop == CONFIRMED and steps[-1].signs["28->30"] in ("+p", "-p")


def test_below_range_recommends_zero_without_confirming():
    steps = run_all(make_space(1, 256, math.sqrt(2), 5, 24, 3), lambda c: -0.2)
    last = steps[-1]
    assert last.stop == BELOW_RANGE and last.threshold == 0 and last.points == ()
    assert not any(isinstance(s, ThresholdConfirmStep) and s.points for s in steps)


def test_the_crossover_search_leaves_the_reserve_for_the_confirmation():
    # A budget of 12 cells, 2 kept back: the crossover search stops on its budget at 10,
    # the confirmation still measures its pair (12 cells in all), then stops on the budget.
    sp = make_space(1, 256, math.sqrt(2), 5, 12, 3)
    steps = run_all(sp, linear(28))
    crossing_steps = [s for s in steps if not isinstance(s, ThresholdConfirmStep)]
    assert crossing_steps[-1].stop == BUDGET and crossing_steps[-1].cells_before == 10
    measured_pairs = [p for s in steps if isinstance(s, ThresholdConfirmStep) for p in s.points]
    assert len(measured_pairs) == 1
    assert steps[-1].cells_before == 12


def test_three_candidates_confirm_two_adjacent_pairs():
    # Zero at c=29, 0.5 per doubling: the crossover interpolated between 23 and 32 is 29;
    # by distance in log2 from it the top three are 30 (0.049), 28 (0.051), 32 (0.142). Both
    # adjacent pairs are measured in one step, each at its higher value: at c=30 the model
    # says 0.5 x log2(29/30) = -2.4 % (30 loses to 28), so the walk up stops at 28.
    steps = run_all(make_space(1, 256, math.sqrt(2), 5, 30, 3), linear(29, 0.5),
                    sigma=0.005, candidates=3)
    last = steps[-1]
    top = sorted(c.value for c in last.candidates[:3])
    assert top == [28, 30, 32]
    first = next(s for s in steps if isinstance(s, ThresholdConfirmStep) and s.points)
    assert [p[:2] for p in first.points] == list(zip(top, top[1:], strict=False))
    assert all(p[2] == 0 for p in first.points)
    assert last.stop == CONFIRMED and last.threshold == 28


def test_a_crash_during_confirmation_replays_the_same_steps():
    # Everything the full search measured, then only what committed before a crash in the
    # confirmation step: the replay reaches the same confirmation step, still to run; with
    # its pair committed, the same finished trace.
    sp = make_space(1, 256, math.sqrt(2), 5, 24, 3)
    full = run_all(sp, linear(28), sigma=0.005)
    crossing_measured = crossing(linear(28), 0.005)
    pair = pairs_from(linear(28), 0.005)
    pairs = [p for s in full if isinstance(s, ThresholdConfirmStep) for p in s.points]
    resumed = replay_threshold(sp, 2, CAPTURED, 2, crossing_measured, {})
    assert resumed == full[:len(resumed)] and resumed[-1].points == tuple(pairs)
    again = replay_threshold(sp, 2, CAPTURED, 2, crossing_measured,
                             {p: pair(p) for p in pairs})
    assert again == full and again[-1].stop == CONFIRMED
