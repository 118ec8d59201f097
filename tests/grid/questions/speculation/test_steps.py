"""The surface search's steps on hand-made costs: the coarse rectangle, the leave-one-out checks
along depth and load, the depth and load a disagreement opens, the budget, the stops and the
replay (every expected value worked out by hand in the comments)."""

import pytest

from grid.questions.speculation.steps import (
    BUDGET,
    FITS,
    OWN,
    RESOLUTION,
    SurfaceSpace,
    checks,
    coarse_points,
    drafter_name,
    next_step,
    result,
    rung,
    steps_of,
)

LATTICE = (1, 2, 4, 8, 16, 32, 64)


def space(coarse=(1, 8, 64), depths=(1, 2, 3, 4, 5, 6, 7), max_cells=60, profile=True,
          forced=True, zero=False):
    return SurfaceSpace(LATTICE, coarse, depths, (0.5, 0.9), max_cells, 0.05, profile, forced,
                        zero)


def est(value, half=0.05):
    return (value, value - half, value + half)


# c(B, k) on the coarse rectangle: flat at c=1, bent in k at c=64 (2, 3, 5: the line through
# k=1 and k=7 gives 3.5 at k=4), c=8 the log-middle of the two (so every check along load
# agrees), with a wide interval at (8, 4) that holds its neighbours' 2.25.
BENT = {(1, 1): est(1.0), (1, 4): est(1.0), (1, 7): est(1.0),
        (8, 1): est(1.5), (8, 4): est(2.0, 0.3), (8, 7): est(3.0),
        (64, 1): est(2.0), (64, 4): est(3.0, 0.1), (64, 7): est(5.0)}


def coarse_chosen(sp):
    return set(coarse_points(sp))


def test_the_coarse_step_is_the_rectangle_the_baseline_the_check_and_the_drafter():
    step = next_step(space(), set(), {})
    pts = set(step.points)
    assert {(b, 0, 0) for b in (1, 8, 64)} <= pts                       # the baseline
    assert {(b, k, 0) for b in (1, 8, 64) for k in (1, 4, 7)} <= pts    # 3 loads x 3 depths
    assert {(b, 4, 1) for b in (1, 8, 64)} <= pts                       # depth 4 at rate 0.9
    assert (1, 7, OWN) in pts                                           # the drafter, c=1, k=7
    assert len(pts) == 3 + 9 + 3 + 1
    # servers: baseline, k=1, k=4, k=7, k=4 at rate 0.9, k=7 unforced
    assert step.starts == 6 and step.stop is None
    assert (1, 7, OWN) not in next_step(space(profile=False), set(), {}).points


def test_checks_predict_each_inner_cell_from_its_two_neighbours():
    found = {(c.axis, c.load, c.depth): c for c in checks(BENT, 0.05)}
    # along depth: k=4 at each load from k=1 and k=7 (the middle: the mean)
    assert found[("depth", 1, 4)].fit == pytest.approx(1.0) and found[("depth", 1, 4)].agrees
    # c=8: (1.5 + 3.0) / 2 = 2.25, inside [1.7, 2.3]
    assert found[("depth", 8, 4)].fit == pytest.approx(2.25) and found[("depth", 8, 4)].agrees
    # c=64: (2 + 5) / 2 = 3.5, outside [2.9, 3.1] and 0.5 > 5 % of 3.0
    bad = found[("depth", 64, 4)]
    assert bad.fit == pytest.approx(3.5) and not bad.agrees and bad.between == (1, 7)
    # along load: c=8 is log2 3 of log2 64 = 6, the middle: (1.0 + 2.0) / 2 = 1.5 at k=1
    assert found[("load", 8, 1)].fit == pytest.approx(1.5) and found[("load", 8, 1)].agrees
    assert len(found) == 6  # one inner cell per line, 3 loads and 3 depths


def test_a_cell_outside_its_interval_but_within_the_tolerance_agrees():
    costs = {(1, 1): est(1.0, 0.001), (1, 2): est(1.04, 0.001), (1, 3): est(1.0, 0.001)}
    (c,) = checks(costs, 0.05)
    # fit 1.0 against 1.04: outside [1.039, 1.041] but 0.04 < 5 % of 1.04
    assert c.fit == pytest.approx(1.0) and c.agrees


def test_a_bend_in_depth_opens_the_middle_depth_of_each_gap_beside_it():
    sp = space()
    step = next_step(sp, coarse_chosen(sp), BENT, 2)
    # (64, 4) disagrees: gaps (1, 4) -> 2 or 3, the middle 2.5, the lower on a tie: 2;
    # (4, 7) -> 5 or 6, the middle 5.5: 5. Each a new server at every load of the rectangle.
    assert set(step.points) == {(b, k, 0) for k in (2, 5) for b in (1, 8, 64)}
    assert step.starts == 2 and step.cells_before == 16
    assert "c=64 k=4 (depth)" in step.why and "depth 2, depth 5" in step.why


def test_a_bend_in_load_opens_the_geometric_middle_load_of_each_gap():
    # at depth 4: c=8 far from the log-middle of c=1 (1.0) and c=64 (3.0), 2.0 -> 1.3
    costs = {**BENT, (8, 4): est(1.3, 0.05), (64, 4): est(3.5)}
    sp = space()
    step = next_step(sp, coarse_chosen(sp), costs, 2)
    # gaps (1, 8): 2 and 4 equally near sqrt(8), the lower: 2; (8, 64): 16 and 32 equally
    # near sqrt(512), the lower: 16. A new load: the baseline and every depth of the rectangle
    # (1, 4, 7) there; the depth checks at c=8 now disagree too: (1.5 + 3) / 2 = 2.25 vs 1.3,
    # so depths 2 and 5 open as well, at every load (old and new).
    new_loads = {(b, k, 0) for b in (2, 16) for k in (0, 1, 4, 7)}
    new_depths = {(b, k, 0) for k in (2, 5) for b in (1, 2, 8, 16, 64)}
    assert set(step.points) == new_loads | new_depths
    assert step.starts == 6  # the baseline, k=1 4 7 at the new loads, k=2 and k=5


def test_a_step_that_does_not_fit_runs_the_new_depths_that_do():
    sp = space(max_cells=16 + 3)  # room for one depth at 3 loads
    step = next_step(sp, coarse_chosen(sp), BENT, 2)
    # the gaps in order of the disagreement: (1, 4) first -> depth 2
    assert set(step.points) == {(1, 2, 0), (8, 2, 0), (64, 2, 0)}
    assert "only depth(s) 2 fit the budget" in step.why
    none = next_step(space(max_cells=16 + 2), coarse_chosen(sp), BENT, 2)
    assert none.stop == BUDGET and none.points == ()


def test_agreeing_checks_stop_and_a_bend_with_nothing_between_is_resolution():
    sp = space()
    flat = {key: est(1.0 + 0.1 * key[1]) for key in BENT}
    assert next_step(sp, coarse_chosen(sp), flat, 2).stop == FITS
    tight = space(depths=(1, 2, 3))
    bent = {(b, k): est(v) for b in (1, 8, 64) for k, v in ((1, 1.0), (2, 2.0), (3, 2.2))}
    step = next_step(tight, coarse_chosen(tight), bent, 2)
    # k=2 at every load: (1.0 + 2.2) / 2 = 1.6 vs 2.0, but no depth lies between 1, 2 and 3
    assert step.stop == RESOLUTION and step.points == ()


def test_the_replay_rebuilds_every_step_and_counts_cells_and_starts():
    sp = space()
    first = coarse_points(sp)
    second = [(b, k, 0) for k in (2, 5) for b in (1, 8, 64)]
    costs = {**BENT, (1, 2): est(1.0), (1, 5): est(1.0), (8, 2): est(1.7), (8, 5): est(2.4),
             (64, 2): est(2.4), (64, 5): est(4.0)}
    steps = steps_of(sp, {*first, *second}, costs)
    assert [s.number for s in steps] == [1, 2, 3]
    assert set(steps[1].points) == set(second)
    # After depths 2 and 5, along depth at c=64 (2.0, 2.4, 3.0, 4.0, 5.0 at k=1 2 4 5 7):
    # k=4 from k=2 and 5: 2.4 + 2/3 x 1.6 = 3.47 vs 3.0 [2.9, 3.1]: disagrees (gaps (2, 4):
    # depth 3, (4, 5): none); k=5 from 4 and 7: 3.0 + 1/3 x 2.0 = 3.67 vs 4.0: disagrees
    # (gap (5, 7): depth 6); k=2 from 1 and 4: 2.33 vs 2.4, within 5 %: agrees. At c=8
    # k=5: 2.33 vs 2.4 within 5 %, k=4: 2.17 inside [1.7, 2.3]: agree.
    assert steps[2].stop is None
    assert set(steps[2].points) == {(b, k, 0) for k in (3, 6) for b in (1, 8, 64)}
    res = result(sp, steps)
    assert (res["cells"], res["starts"]) == (16 + 6, 6 + 2)  # step 3 not measured yet
    assert (res["dense_cells"], res["dense_starts"]) == (7 * (1 + 7 * 2), 1 + 7 * 2)
    assert res["design"] == {"loads": [1, 8, 64], "depths": [1, 2, 4, 5, 7]}


def test_by_default_the_coarse_step_is_the_drafters_own_cells():
    own = space(forced=False)
    step = next_step(own, set(), {})
    # the baseline and the drafter's own at depths 1, 4, 7 at c = 1, 8, 64: no forced cell,
    # no length check, no profiling cell of its own (the rectangle profiles the drafter)
    assert set(step.points) == ({(b, 0, 0) for b in (1, 8, 64)}
                                | {(b, k, OWN) for b in (1, 8, 64) for k in (1, 4, 7)})
    assert step.starts == 4 and "the drafter's own cells" in step.why
    # the dense grid: the baseline and 7 depths unforced at 7 loads, 8 servers
    assert (own.dense_cells, own.dense_starts) == (7 * 8, 8)
    # a disagreement opens depths of the drafter's own cells
    bent = next_step(own, set(step.points), BENT, 2)
    assert set(bent.points) == {(b, k, OWN) for k in (2, 5) for b in (1, 8, 64)}


def test_the_best_depth_refines_where_it_rests_on_no_cell_and_where_it_changes():
    own = space(forced=False)
    chosen = set(coarse_points(own))
    flat = {key: est(1.0 + 0.1 * key[1]) for key in BENT}  # every check agrees
    assert next_step(own, chosen, flat, 2, {1: 1, 8: 1, 64: 0}).stop is None
    step = next_step(own, chosen, flat, 2, {1: 2, 8: 0, 64: 0})
    # depth 2 is best at c=1 but only interpolated (1, 4, 7 measured): depth 2 at every
    # load; the best changes between c=1 and c=8: the load between, 2 (2 and 4 equally near
    # sqrt(8) in log, the lower), with the baseline and every depth there
    assert set(step.points) == ({(2, 0, 0)} | {(2, k, OWN) for k in (1, 2, 4, 7)}
                                | {(b, 2, OWN) for b in (1, 8, 64)})
    assert step.starts == 5 and "the best depth changes or rests on no measured cell" in step.why
    # the same best everywhere, every depth chosen measured: fits
    assert next_step(own, chosen, flat, 2, {1: 4, 8: 4, 64: 4}).stop == FITS


def test_the_replay_asks_the_best_depth_of_the_cells_each_step_saw():
    own = space(forced=False)
    first = coarse_points(own)
    second = [(2, 0, 0), *((2, k, OWN) for k in (1, 2, 4, 7)), *((b, 2, OWN) for b in (1, 8, 64))]
    costs = {(b, k): est(1.0 + 0.1 * k) for b in (1, 2, 8, 64) for k in (1, 2, 4, 7)}
    seen = []

    def best_of(keys):  # depth 2 pays up to c=2, the baseline above
        seen.append(frozenset(keys))
        return {b: 2 if b <= 2 else 0 for b in sorted({b for b, _ in keys})}
    steps = steps_of(own, {*first, *second}, costs, best_of)
    # step 2 saw the coarse rectangle (1, 8, 64 x 1, 4, 7); step 3 also c=2 and depth 2: the
    # best changes between c=2 and c=8, so the load between (4) is measured, at every depth
    assert seen[0] == {(b, k) for b in (1, 8, 64) for k in (1, 4, 7)}
    assert set(steps[1].points) == set(second)
    assert set(steps[2].points) == {(4, 0, 0), *((4, k, OWN) for k in (1, 2, 4, 7))}


def test_depth_zero_is_measured_where_the_engine_runs_it():
    # speculation configured with no drafts at the coarse loads' ends and middle: one server
    step = next_step(space(forced=False, zero=True), set(), {})
    assert {(1, 0, OWN), (8, 0, OWN), (64, 0, OWN)} <= set(step.points)
    assert len(step.points) == 12 + 3 and step.starts == 5
    assert "depth 0 (speculation configured, no drafts) at loads 1 8 64" in step.why
    # not a point of the fit: the flat rectangle still fits with c(B, 0) far off its line
    own = space(forced=False, zero=True)
    flat = {key: est(1.0 + 0.1 * key[1]) for key in BENT}
    flat.update({(b, 0): est(3.0) for b in (1, 8, 64)})
    assert next_step(own, set(coarse_points(own)), flat, 2).stop == FITS


def test_other_drafters_are_measured_on_the_coarse_rectangle_each_on_its_own_server():
    sp = SurfaceSpace(LATTICE, (1, 8, 64), (4,), (0.7,), 60, 0.05, True, False,
                      drafters=("/cache/ladder/noise-0.00", "/cache/ladder/noise-0.60/"))
    step = next_step(sp, set(), {})
    # the baseline and the drafter's own at 3 loads, depth 4 (the only one); then each other
    # drafter at the same 3 loads: rate index -2 for the first listed, -3 for the second
    assert set(step.points) == {(b, k, r) for b in (1, 8, 64)
                                for k, r in ((0, 0), (4, OWN), (4, -2), (4, -3))}
    assert step.starts == 4  # baseline, own, two drafters
    assert (rung(0), rung(1)) == (-2, -3)
    assert [drafter_name(sp, r) for r in (-2, -3)] == ["noise-0.00", "noise-0.60"]
    # the dense grid: 7 loads x (the baseline + own + 2 drafters at depth 4)
    assert (sp.dense_starts, sp.dense_cells) == (4, 28)
    # the drafters' cells never move the surface's rectangle: the surface (own cells, all
    # agreeing along load: 1, 2, 3 at c=1, 8, 64 is linear in log B) fits
    costs = {(1, 4): est(1.0), (8, 4): est(2.0), (64, 4): est(3.0)}
    after = next_step(sp, set(step.points), costs, 2)
    assert after.stop == FITS and result(sp, [step, after])["design"] == {
        "loads": [1, 8, 64], "depths": [4]}
