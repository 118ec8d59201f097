"""The depth search's steps (grid/questions/depth/steps.py) and its confirmation (confirm.py) on
constructed surfaces whose best schedule is known. Every expected trace is worked out by hand
from docs/search.md: lattice 1 2 4 8 16 (factor 2), coarse levels 1 4 16, depths
0 1 3 5 (0 = the baseline), so a level over every depth measures {0, 3, 5} first (the ends and
C[len // 2] = 3).

Each cell's bootstrap replicates are value x (1 + s z), z = 2001 points evenly over [-1, 1]
(its 2.5 and 97.5 percentiles are exactly -0.95 and +0.95), with the sign of z flipped for
every other depth (0 and 3: +, 1 and 5: -). Two neighbouring depths are then antithetic and
the interval of a over b is exactly (a/b)(1 - 0.95 s)/(1 + 0.95 s) - 1 .. (a/b)(1 + 0.95 s)/(1 -
0.95 s) - 1 (s averaged over the repeats); depths of the same sign give a zero-width interval
at a/b - 1."""

from __future__ import annotations

import numpy as np
import pytest

from grid.analysis.depth import Throughput, schedule
from grid.questions.depth.confirm import (
    ADAPTIVE,
    CONFIRMED,
    NOTHING,
    SCHEDULE,
    THRESHOLD,
    ScheduleConfirmStep,
    confirm_result,
    replay_all,
    threshold_schedule,
)
from grid.questions.depth.steps import (
    BUDGET,
    RESOLVED,
    DepthSpace,
    best_single_depth,
    depth_at,
    depth_result,
    first_depths,
    prior_depths,
    replay_depth,
)

LATTICE = (1, 2, 4, 8, 16)
DEPTHS = (0, 1, 3, 5)
Z = np.linspace(-1.0, 1.0, 2001)
SIGN = {0: 1, 1: -1, 3: 1, 5: -1, SCHEDULE: 1, ADAPTIVE: -1, THRESHOLD: -1}


def space(max_cells: int = 64, max_repeats: int = 3, lattice=LATTICE, coarse=(1, 4, 16),
          depths=DEPTHS, prior=()) -> DepthSpace:
    return DepthSpace(lattice, coarse, depths, max_cells, max_repeats, 0.05, prior)


def surface(values: dict[int, dict[int, float]], spread: float = 0.005,
            spreads: dict[tuple[int, int, int], float] | None = None, repeats: int = 3):
    """Every (load, depth, repeat) measured at `values[load][depth]` tok/s."""
    out = {}
    for load, row in values.items():
        for depth, value in row.items():
            for r in range(repeats):
                s = (spreads or {}).get((load, depth, r), spread)
                out[(load, depth, r)] = Throughput(value, value * (1 + s * SIGN[depth] * Z))
    return out


def points(steps) -> list[list[tuple[int, int, int]]]:
    return [list(s.points) for s in steps]


MONOTONE = {1: {0: 100, 1: 120, 3: 150, 5: 170}, 2: {0: 100, 1: 118, 3: 145, 5: 160},
            4: {0: 100, 1: 115, 3: 140, 5: 130}, 8: {0: 100, 1: 105, 3: 110, 5: 95},
            16: {0: 100, 1: 90, 3: 85, 5: 70}}


def test_monotone_surface_is_found_with_16_of_20_cells():
    steps = replay_depth(space(), surface(MONOTONE))
    assert points(steps) == [
        # coarse: c=1, 4, 16 at {0, 3, 5}
        [(1, 0, 0), (1, 3, 0), (1, 5, 0), (4, 0, 0), (4, 3, 0), (4, 5, 0), (16, 0, 0),
         (16, 3, 0), (16, 5, 0)],
        # c=1: 5 best, its neighbour 3 measured: decided (+13 %). c=4: 3 best, its neighbour
        # 1 untested; c=16: the baseline best, its neighbour 1 untested: refine
        [(4, 1, 0), (16, 1, 0)],
        # 5 at c=1 vs 3 at c=4: c=2 over {3, 5}; 3 at c=4 vs 0 at c=16: c=8 over {0, 1, 3}
        [(2, 3, 0), (2, 5, 0), (8, 0, 0), (8, 1, 0), (8, 3, 0)],
        # c=2: 5 (+10 % over 3); c=8: 3 (+4.8 % over 1, interval +3.8 .. +5.8 %): decided;
        # 2-4 and 8-16 are neighbours: resolved
        []]
    assert steps[-1].stop == RESOLVED and steps[-1].cells_before == 16
    tiers = schedule(steps[-1].levels)
    assert tiers == ((1, 5), (4, 3), (16, 0))
    assert [depth_at(tiers, c) for c in LATTICE] == [5, 5, 3, 3, 0]
    # 5 and 3 each cover two lattice levels: the smaller depth wins the tie
    assert best_single_depth(tiers, LATTICE) == 3


# The best depth rises from 3 (c=1) to 5 (c=2, 4), then falls to 3 (c=8) and 0 (c=16).
RISING = {1: {0: 100, 1: 130, 3: 140, 5: 135}, 2: {0: 100, 1: 125, 3: 140, 5: 160},
          4: {0: 100, 1: 120, 3: 140, 5: 160}, 8: {0: 100, 1: 110, 3: 125, 5: 115},
          16: {0: 100, 1: 95, 3: 90, 5: 80}}


def test_a_best_depth_that_rises_then_falls_is_followed_both_ways():
    steps = replay_depth(space(), surface(RISING))
    assert points(steps)[1:] == [
        # c=1: 3 best, neighbours 1 and 5: 1 untested; c=4: 5 best over 3 (+14 %); c=16: 0
        [(1, 1, 0), (16, 1, 0)],
        # 3 at c=1 vs 5 at c=4: c=2 over {3, 5} (the range between the two, either way up);
        # 5 at c=4 vs 0 at c=16: c=8 over every depth, {0, 3, 5} first
        [(2, 3, 0), (2, 5, 0), (8, 0, 0), (8, 3, 0), (8, 5, 0)],
        # c=8: 3 best, its neighbour 1 untested
        [(8, 1, 0)],
        []]
    assert steps[-1].stop == RESOLVED and steps[-1].cells_before == 17
    assert schedule(steps[-1].levels) == ((1, 3), (2, 5), (8, 3), (16, 0))


# 3 and 5 within 1.2 % of each other at c=1 and c=4, measured with s = 1 % (interval about
# -0.7 .. +3.1 %, inside ±5 %): ties, decided by their point estimates without repeats, and the
# switch between them is not bisected: c=2 is never measured.
TIED = {1: {0: 100, 1: 120, 3: 168, 5: 170}, 2: {0: 100, 1: 118, 3: 160, 5: 160},
        4: {0: 100, 1: 115, 3: 150, 5: 149}, 8: {0: 100, 1: 105, 3: 110, 5: 95},
        16: {0: 100, 1: 90, 3: 85, 5: 70}}


def test_ties_are_decided_by_their_point_estimates_and_not_bisected():
    spreads = {(c, d, 0): 0.01 for c in (1, 4) for d in (3, 5)}
    steps = replay_depth(space(), surface(TIED, spreads=spreads))
    assert points(steps)[1:] == [[(4, 1, 0), (16, 1, 0)],
                                 [(8, 0, 0), (8, 1, 0), (8, 3, 0)], []]
    levels = {lv.load: lv for lv in steps[-1].levels}
    assert sorted(levels) == [1, 4, 8, 16]
    assert (levels[1].best, levels[1].runner, levels[1].sign) == (5, 3, "+p")
    assert (levels[4].best, levels[4].runner, levels[4].sign) == (3, 5, "+p")
    assert schedule(steps[-1].levels) == ((1, 5), (4, 3), (16, 0))
    assert steps[-1].cells_before == 14


def test_a_wide_interval_between_the_two_best_is_repeated_until_it_decides():
    # c=4: 3 (150) over 5 (141) is +6.4 %. The first repeat of each is spread s = 8 %:
    # interval 1.0638 x 0.924 / 1.076 - 1 = -8.6 % .. +23.9 %, straddling 0 beyond ±5 %: one
    # more repeat of both. Later repeats are exact (s = 0), so the mean spread is 8 % / 2:
    # -1.4 % .. +14.8 %, again; then 8 % / 3: +1.1 % .. +12 %: decided, 3 wins.
    values = {**MONOTONE, 4: {0: 100, 1: 115, 3: 150, 5: 141}}
    spreads = {(4, 3, 0): 0.08, (4, 5, 0): 0.08, (4, 3, 1): 0.0, (4, 5, 1): 0.0,
               (4, 3, 2): 0.0, (4, 5, 2): 0.0}
    steps = replay_depth(space(), surface(values, spreads=spreads))
    repeats = [p for s in steps for p in s.points if p[2] > 0]
    assert repeats == [(4, 3, 1), (4, 5, 1), (4, 3, 2), (4, 5, 2)]
    level = {lv.load: lv for lv in steps[-1].levels}[4]
    assert (level.best, level.runner, level.sign, level.versus.repeats) == (3, 5, "+", 3)
    assert level.versus.lo == pytest.approx(150 / 141 * (1 - 0.95 * 0.08 / 3)
                                            / (1 + 0.95 * 0.08 / 3) - 1)
    assert schedule(steps[-1].levels) == ((1, 5), (4, 3), (16, 0))
    # With one measurement per level the same interval is decided by its point estimate.
    once = replay_depth(space(max_repeats=1), surface(values, spreads=spreads))
    assert not [p for s in once for p in s.points if p[2] > 0]
    assert {lv.load: lv for lv in once[-1].levels}[4].sign == "+p"


def test_the_budget_stops_the_search_with_the_points_that_fit():
    steps = replay_depth(space(max_cells=12), surface(MONOTONE))
    # 9 + 2 cells, then only 1 of the 5 of step 3 fits; then nothing does
    assert [len(s.points) for s in steps] == [9, 2, 1, 0]
    assert steps[-1].stop == BUDGET and steps[-1].cells_before == 12
    # What is known is still a schedule: c=2's 3 alone says 3 there
    assert schedule(steps[-1].levels) == ((1, 5), (2, 3), (16, 0))


def test_a_killed_search_replays_to_the_same_steps_from_its_committed_cells():
    full = surface(MONOTONE)
    steps = replay_depth(space(), full)
    chosen = [p for s in steps for p in s.points]
    for k in range(len(chosen)):
        committed = {p: full[p] for p in chosen[:k]}  # killed after k cells
        resumed = replay_depth(space(), committed)
        done = len(resumed) - 1
        # every finished step replays as it was; the last is the one that was running
        assert [s.as_json() for s in resumed[:done]] == [s.as_json() for s in steps[:done]]
        assert resumed[-1].points == steps[done].points
        # measuring the rest of that step and going on gives the same trace
        rest = {**committed, **{p: full[p] for p in chosen}}
        assert [s.as_json() for s in replay_depth(space(), rest)] == \
            [s.as_json() for s in steps]


# --------------------------------------------------------------------------- confirmation
CONFIRM_LATTICE = (1, 2, 4, 8)
# 5 is best at c=1, 2, 4 and 3 at c=8. Every level is coarse, so nothing is bisected: {0, 3,
# 5} at each, and depth 1 at c=8, the untested neighbour of its best (13 cells).
# The schedule's own server and SGLang's adaptation: at c=2 the schedule beats the baseline
# and the adaptation; at c=8 it beats the baseline and depth 5, but the adaptation beats it.
CONFIRM = {1: {0: 100, 1: 120, 3: 150, 5: 170}, 2: {0: 100, 1: 118, 3: 140, 5: 150},
           4: {0: 100, 1: 112, 3: 130, 5: 135}, 8: {0: 100, 1: 104, 3: 110, 5: 95}}
SERVERS = {2: {SCHEDULE: 152, ADAPTIVE: 140}, 8: {SCHEDULE: 108, ADAPTIVE: 116}}


def test_the_schedule_is_confirmed_on_one_server_where_its_intervals_say_so():
    s = space(lattice=CONFIRM_LATTICE, coarse=CONFIRM_LATTICE)
    measured = surface({c: {**CONFIRM[c], **SERVERS.get(c, {})} for c in CONFIRM_LATTICE})
    steps = replay_all(s, 12, True, measured)
    search = [st for st in steps if not isinstance(st, ScheduleConfirmStep)]
    assert schedule(search[-1].levels) == ((1, 5), (8, 3)) and search[-1].cells_before == 13
    confirm = [st for st in steps if isinstance(st, ScheduleConfirmStep)]
    # Tier 1 (5, levels 1 2 4): at its geometric middle, c=2; tier 2 (3, from 8): c=8. The best
    # single depth is 5 (three levels), so only tier 2 is compared with it (depth 5 at c=8,
    # measured by the search, as are both baselines): four new cells in one step.
    assert [list(st.points) for st in confirm] == [
        [(2, ADAPTIVE, 0), (2, SCHEDULE, 0), (8, ADAPTIVE, 0), (8, SCHEDULE, 0)], []]
    last = confirm[-1]
    assert last.stop == CONFIRMED and last.cells_before == 17
    tier1, tier2 = last.checks
    assert (tier1.start, tier1.depth, tier1.load) == (1, 5, 2)
    assert [(c.against, c.verdict) for c in tier1.comparisons] == [(0, "beats"),
                                                                   (ADAPTIVE, "beats")]
    assert (tier2.start, tier2.depth, tier2.load) == (8, 3, 8)
    assert [(c.against, c.verdict) for c in tier2.comparisons] == [
        (0, "beats"), (5, "beats"), (ADAPTIVE, "loses")]
    assert tier1.stands and not tier2.stands
    result = confirm_result(steps)
    assert result["stands"] is False and [t["stands"] for t in result["tiers"]] == [True, False]
    # 108 / 116 - 1 with the schedule and the adaptation antithetic (s = 0.5 %)
    assert result["tiers"][1]["comparisons"][2]["speedup"] == pytest.approx(108 / 116 - 1,
                                                                             abs=1e-4)


def test_a_schedule_that_never_drafts_has_nothing_to_confirm():
    s = space(lattice=(1, 2), coarse=(1, 2), depths=(0, 3, 5))
    flat = {c: {0: 100, 3: 80, 5: 70} for c in (1, 2)}
    steps = replay_all(s, 12, False, surface(flat))
    assert isinstance(steps[-1], ScheduleConfirmStep) and steps[-1].stop == NOTHING
    assert schedule(steps[0].levels) == ()  # no level measured before step 1
    assert confirm_result(steps)["stands"] is False


def test_the_threshold_schedule_is_the_best_single_depth_off_where_the_schedule_turns_it_off():
    lattice = (1, 2, 4, 8, 16)
    # 5 at three levels is the best single depth; the schedule turns drafting off from 16
    assert threshold_schedule(((1, 5), (8, 3), (16, 0)), lattice) == ((1, 5), (16, 0))
    # never off: the threshold schedule is depth 5 everywhere, the best single depth's server
    assert threshold_schedule(((1, 5), (8, 3)), lattice) is None
    # on/off already: no other server
    assert threshold_schedule(((1, 5), (8, 0)), lattice) is None
    # never drafts: none
    assert threshold_schedule(((1, 0),), lattice) is None


# 5 best at c=1 and 2, 3 at c=4, the baseline at c=8: schedule (1, 5), (4, 3), (8, 0); its
# threshold schedule (1, 5), (8, 0) differs from it only at the depth-3 tier, where it drafts 5.
OFF_AT_8 = {1: {0: 100, 1: 120, 3: 150, 5: 170}, 2: {0: 100, 1: 118, 3: 140, 5: 150},
            4: {0: 100, 1: 112, 3: 135, 5: 125}, 8: {0: 100, 1: 96, 3: 90, 5: 80}}
OFF_SERVERS = {1: {SCHEDULE: 169}, 4: {SCHEDULE: 133, THRESHOLD: 126},
               8: {SCHEDULE: 100}}


def test_the_schedule_is_confirmed_against_the_threshold_schedule_where_they_differ():
    s = space(lattice=CONFIRM_LATTICE, coarse=CONFIRM_LATTICE)
    measured = surface({c: {**OFF_AT_8[c], **OFF_SERVERS.get(c, {})} for c in CONFIRM_LATTICE})
    steps = replay_all(s, 12, False, measured)
    search = [st for st in steps if not isinstance(st, ScheduleConfirmStep)]
    assert schedule(search[-1].levels) == ((1, 5), (4, 3), (8, 0))
    last = steps[-1]
    assert isinstance(last, ScheduleConfirmStep) and last.stop == CONFIRMED
    assert last.threshold == ((1, 5), (8, 0))
    by_tier = {t.depth: [(c.against, c.verdict) for c in t.comparisons] for t in last.checks}
    # tier 1 (depth 5, c=1): the threshold schedule drafts 5 there too: only the baseline
    assert by_tier[5] == [(0, "beats")]
    # tier 2 (depth 3, c=4): against the baseline (133 vs 100), depth 5 (133 vs 125) and the
    # threshold schedule's server (133 vs 126: it drafts 5 at c=4)
    assert by_tier[3] == [(0, "beats"), (5, "beats"), (THRESHOLD, "beats")]
    # tier 3 (the zero tier, c=8): the threshold schedule is off there too: the baseline and
    # depth 5; the schedule's zero-step server (100, same sign as the baseline: a zero-width
    # interval at 0) ties the plain baseline
    assert by_tier[0] == [(0, "ties"), (5, "beats")]
    result = confirm_result(steps)
    assert result["threshold_schedule"] == [[1, 5], [8, 0]] and result["stands"] is True
    # the confirmation's cells: the schedule's server at each tier's load, the threshold's at c=4
    confirming = [p for st in steps if isinstance(st, ScheduleConfirmStep) for p in st.points]
    assert sorted(confirming) == [(1, SCHEDULE, 0), (4, THRESHOLD, 0), (4, SCHEDULE, 0),
                                  (8, SCHEDULE, 0)]


def test_a_prior_names_the_depth_each_level_starts_from():
    assert first_depths((0, 1, 3, 5), None) == (0, 3, 5)  # no prior: the ends and the middle
    assert first_depths((0, 1, 3, 5), 3) == (1, 3, 5)
    assert first_depths((0, 1, 3, 5), 0) == (0, 1)
    assert first_depths((0, 1, 3, 5), 4) == (1, 3, 5)  # 3 and 5 equally near: the smaller
    assert first_depths((0, 1, 3), 7) == (1, 3)  # beyond the candidates: the nearest end
    # the depth predicted fastest, the baseline (0) counting as no speedup; ties: the smaller
    assert prior_depths((0, 1, 3), (1, 8, 16), {1: [0.2, -0.1, 0.1], 3: [0.3, -0.2, 0.1]}) \
        == ((1, 3), (8, 0), (16, 1))


# MONOTONE's own best depth at every level, as a right twin would predict it
RIGHT = ((1, 5), (2, 5), (4, 3), (8, 3), (16, 0))


def test_a_right_prior_finds_the_same_schedule_with_fewer_cells():
    steps = replay_depth(space(prior=RIGHT), surface(MONOTONE))
    assert points(steps) == [
        # c=1 around 5: {3, 5}; c=4 around 3: {1, 3, 5}; c=16 around 0: {0, 1}
        [(1, 3, 0), (1, 5, 0), (4, 1, 0), (4, 3, 0), (4, 5, 0), (16, 0, 0), (16, 1, 0)],
        # all three decided (5 over 3 +13 %, 3 over 5 +7.7 %, 0 over 1 +11 %): c=2 over
        # {3, 5} around 5, c=8 over {0, 1, 3} around 3: {1, 3}
        [(2, 3, 0), (2, 5, 0), (8, 1, 0), (8, 3, 0)],
        []]
    assert steps[-1].stop == RESOLVED and steps[-1].cells_before == 11  # 16 without the prior
    assert schedule(steps[-1].levels) == ((1, 5), (4, 3), (16, 0))
    check = depth_result(space(prior=RIGHT), steps)["prior"]
    assert (check["agree"], check["of"]) == (5, 5)


def test_a_wrong_prior_costs_cells_but_not_the_answer():
    wrong = tuple((c, 0) for c in LATTICE)  # "never speculate"
    steps = replay_depth(space(prior=wrong), surface(MONOTONE))
    assert steps[-1].stop == RESOLVED
    assert schedule(steps[-1].levels) == ((1, 5), (4, 3), (16, 0))  # as without a prior
    check = depth_result(space(prior=wrong), steps)["prior"]
    assert check["levels"][0] == {"load": 1, "predicted": 0, "measured": 5}
    assert (check["agree"], check["of"]) == (1, 5)  # right at c=16 only
