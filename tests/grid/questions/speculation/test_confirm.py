"""The confirmation (grid/questions/speculation/confirm.py) and the recommendation it settles
(recommend.py), on hand-made speedups; and on a surface deliberately off (the drafter's own
cells 15 % slower than the forced chain predicts)."""

import numpy as np
import pytest

from grid.analysis.surface import Cost, DomainProfile, best_depths, depth_schedule, predict
from grid.questions.speculation.answers import single_depth
from grid.questions.speculation.confirm import (
    CONFIRMED,
    ConfirmStep,
    agrees,
    confirm_steps,
    crossover_neighbours,
    rechosen,
    settle,
    single_cells,
    single_status,
    switch_loads,
    switch_point,
    switch_steps,
    switch_verdict,
    switched,
    targets,
)
from grid.questions.speculation.recommend import measured_threshold, recommendation, threshold_part
from grid.questions.speculation.steps import is_rung, rung

LATTICE = (1, 2, 4, 8, 16)


def test_the_decision_points_are_each_tiers_first_load_and_the_crossovers_neighbours():
    # depth 3 from 1, depth 1 from 4, off from 16; the configured depth 3 crosses 1 at 5.3
    near = crossover_neighbours(5.3, LATTICE)
    assert near == (4, 8)
    assert crossover_neighbours(float("inf"), LATTICE) == () == crossover_neighbours(None, LATTICE)
    # the off tier at 16 is confirmed at the depth before it (1); (4, 3) and (8, 3) follow
    assert targets(((1, 3), (4, 1), (16, 0)), near, 3, LATTICE) == [
        (1, 3), (4, 1), (16, 1), (4, 3), (8, 3)]
    # a schedule that never drafts is confirmed at its first load at the configured depth
    assert targets(((1, 0),), (), 3, LATTICE) == [(1, 3)]


def test_intervals_that_do_not_overlap_disagree():
    assert agrees((1.2, 1.1, 1.3), (1.25, 1.15, 1.35))
    assert not agrees((0.91, 0.88, 0.94), (1.01, 0.97, 1.05))


PREDICTED = {(1, 3): (1.5, 1.4, 1.6), (16, 1): (1.01, 0.97, 1.05), (16, 3): (0.8, 0.7, 0.9)}


def test_a_disagreeing_cell_asks_for_the_drafters_own_cells_at_its_load_then_stops():
    wanted = [(1, 3), (16, 1)]
    first = confirm_steps(5, 40, wanted, {}, PREDICTED, (1, 3), 12)
    assert [s.points for s in first] == [((1, 3, -1), (16, 1, -1))] and first[0].stop is None
    # (16, 1) measured at 0.91 [0.88, 0.94]: below the predicted [0.97, 1.05] -> depth 3 there
    own = {(1, 3): (1.45, 1.38, 1.52), (16, 1): (0.91, 0.88, 0.94)}
    second = confirm_steps(5, 40, wanted, own, PREDICTED, (1, 3), 12)
    assert second[1].points == ((16, 3, -1),) and second[1].disagree == ((16, 1),)
    own[(16, 3)] = (0.85, 0.8, 0.9)
    last = confirm_steps(5, 40, wanted, own, PREDICTED, (1, 3), 12)[-1]
    assert (last.number, last.stop, last.disagree, last.cells_before) == (7, CONFIRMED,
                                                                           ((16, 1),), 43)
    # the answer at 16 rests on the measured cells: neither depth pays -> the baseline
    assert settle({1: 3, 16: 1}, own, wanted, last.disagree) == {
        1: (3, "confirmed"), 16: (0, "measured")}


def test_a_cell_that_contradicts_the_decision_disagrees_even_inside_the_interval():
    # (1, 3) predicted 1.02 [0.9, 1.15] -> the baseline chosen at c=1; measured 1.11 [1.06,
    # 1.16]: inside the predicted interval, but surely faster than the baseline
    predicted = {(1, 3): (1.02, 0.9, 1.15)}
    own = {(1, 3): (1.11, 1.06, 1.16)}
    steps = confirm_steps(5, 40, [(1, 3)], own, predicted, (1, 3), 12, decided={1: 0})
    assert steps[1].points == ((1, 1, -1),) and steps[1].disagree == ((1, 3),)
    own[(1, 1)] = (1.04, 0.98, 1.1)
    last = confirm_steps(5, 40, [(1, 3)], own, predicted, (1, 3), 12, decided={1: 0})[-1]
    # the answer at c=1 rests on the drafter's own cells: depth 3 (k=1's interval holds 1)
    assert settle({1: 0}, own, [(1, 3)], last.disagree) == {1: (3, "measured")}
    # without the decision, the same cell agrees with the prediction: nothing more measured
    assert confirm_steps(5, 40, [(1, 3)], own, predicted, (1, 3), 12)[-1].disagree == ()


def test_the_budget_cuts_the_confirmation():
    steps = confirm_steps(5, 40, [(1, 3), (16, 1)], {}, PREDICTED, (1, 3), 1)
    assert steps[0].points == ((1, 3, -1),) and "only 1 of 2" in steps[0].why
    none = confirm_steps(5, 40, [(1, 3)], {}, PREDICTED, (1, 3), 0)
    assert none[0].points == () and none[0].stop == "confirm_budget"


CROSS = {"depth": 3, "crossover": 5.3, "interval": [4.5, 6.0], "text": "crossover at 5.3",
         "speculative_disable_above_batch": 4, "plausible_range": [4, 4],
         "statement": "set speculative_disable_above_batch=4"}


def test_a_confirming_load_without_a_measured_baseline_measures_it_too():
    # c=3 k=3 is wanted (where a single depth stops paying) but the surface measured the
    # baseline at c=1 and 2 only: its speedup needs one, so the step asks for (3, 0, 0) too
    wanted = [(1, 3), (3, 3)]
    first = confirm_steps(5, 40, wanted, {}, PREDICTED, (1, 3), 12, baselines={1, 2})
    assert first[0].points == ((1, 3, -1), (3, 3, -1), (3, 0, 0))
    assert first[0].why.endswith("(and the baseline at c=3)")
    # both own cells measured (the baseline at c=3 with them): 2 of 2 agree, 3 cells spent;
    # the same steps on the replay (the surface chose the baselines at 1 and 2 only)
    own = {(1, 3): (1.5, 1.45, 1.55), (3, 3): (0.90, 0.85, 0.95)}  # (1, 3) as predicted
    steps = confirm_steps(5, 40, wanted, own, PREDICTED, (1, 3), 12, baselines={1, 2})
    assert steps[0] == first[0]
    last = steps[-1]
    assert last.stop == CONFIRMED and last.why.startswith("2 of 2 confirming cell(s) agree")
    assert last.cells_before == 43


def test_the_budget_keeps_a_confirming_cell_and_its_baseline_together():
    # three wanted cells, the baseline missing at c=16 and 91, 4 cells of budget: c=1 (1
    # cell), c=16 with its baseline (2), and c=91 with its (2) would make 5: c=91 goes whole.
    # Cut point by point (the 4 first of own, own, own, baseline), c=91's own cell would have
    # been measured without the baseline its speedup needs, and the step asked again forever.
    wanted = [(1, 3), (16, 3), (91, 3)]
    (first,) = confirm_steps(5, 40, wanted, {}, PREDICTED, (1, 3), 4, baselines={1})
    assert first.points == ((1, 3, -1), (16, 3, -1), (16, 0, 0))
    assert first.stop is None
    assert first.why == ("confirm the prediction on the drafter's own cells at c=1 k=3, c=16 "
                         "k=3 (and the baseline at c=16) (only 3 of 5 cell(s) fit "
                         "grid.search.confirm_cells)")
    # not even the first cell fits: nothing measured, the budget stop
    (none,) = confirm_steps(5, 40, [(16, 3)], {}, PREDICTED, (1, 3), 1, baselines={1})
    assert none.points == () and none.stop == "confirm_budget"


def test_the_threshold_is_confirmed_or_rests_on_the_drafters_cells():
    own = {(4, 3): (1.1, 1.05, 1.15), (8, 3): (0.9, 0.85, 0.95)}
    part = threshold_part(CROSS, own, (4, 8), [])
    assert (part["speculative_disable_above_batch"], part["status"]) == (4, "confirmed")
    # (4, 3) disagreed: the highest load up to which every own cell at depth 3 pays: 2
    own = {(1, 3): (1.5, 1.4, 1.6), (2, 3): (1.2, 1.1, 1.3), (4, 3): (0.95, 0.9, 0.99)}
    assert measured_threshold(own, 3) == 2
    part = threshold_part(CROSS, own, (4, 8), [(4, 3)])
    assert (part["speculative_disable_above_batch"], part["status"]) == (2, "measured")
    assert threshold_part(CROSS, {}, (), [])["status"] == "predicted"


def test_one_recommendation_marks_each_part():
    settled = {1: (3, "confirmed"), 2: (3, "predicted"), 4: (1, "confirmed"),
               16: (0, "measured")}
    part = {"speculative_disable_above_batch": 4, "depth": 3, "status": "confirmed",
            "statement": ""}
    rec = recommendation(settled, part, {"sim": lambda tiers: {"tiers": tiers}}, "coding",
                         {}, 0.0)
    assert rec["schedule"] == [[1, 3], [4, 1], [16, 0]]
    # the first tier rests on c=1 (confirmed) and c=2 (predicted): predicted
    assert [t["status"] for t in rec["tiers"]] == ["predicted", "confirmed", "measured"]
    assert rec["status"] == "predicted"
    assert rec["text"] == ("for coding: set speculative_disable_above_batch=4 at depth 3 "
                           "(confirmed); by batch size: depth 3 from batch 1 (predicted), "
                           "depth 1 from batch 4 (confirmed), baseline from batch 16 "
                           "(measured)")
    assert rec["settings"] == {"sim": {"tiers": ((1, 3), (4, 1), (16, 0))}}


def test_a_surface_that_runs_high_is_caught_and_the_answer_rests_on_the_drafters_cells():
    # The forced chain's surface c(B, k) at c = 1, 2, 4, each cost's replicates spread +-2 %;
    # the drafter a = (0.8, 0.5, 0.5): AL = 1.8, 2.2, 2.4 at k = 1, 2, 3.
    spread = np.linspace(0.98, 1.02, 41)
    surface = {(1, 1): 1.2, (1, 2): 1.4, (1, 3): 1.6, (2, 1): 1.5, (2, 2): 1.8, (2, 3): 2.1,
               (4, 1): 1.7, (4, 2): 2.1, (4, 3): 2.5}
    costs = {key: Cost(*key, c, c * spread) for key, c in surface.items()}
    drafter = DomainProfile("coding", (0.8, 0.5, 0.5), (0.8, 0.4, 0.2))
    preds = predict(costs, drafter)
    # predicted: c=1 1.5, 1.571, 1.5; c=2 1.2, 1.222, 1.143; c=4 1.059, 1.048, 0.96 (each
    # interval +-2 %: at c=4 k=1 about [1.04, 1.08], above 1) -> depth 2, 2, 1
    best = best_depths(preds)
    assert best == {1: 2, 2: 2, 4: 1}
    tiers = depth_schedule(best)
    assert tiers == ((1, 2), (4, 1))
    predicted = {key: (p.speedup, *p.interval) for key, p in preds.items()}

    # The drafter's own cells run 15 % slower than the forced chain predicts (its acceptance
    # spreads unlike the chain's): measured = 0.85 x predicted, +-3 %.
    def measured(keys):
        return {k: (0.85 * predicted[k][0], 0.85 * predicted[k][0] * 0.97,
                    0.85 * predicted[k][0] * 1.03) for k in keys}
    wanted = targets(tiers, (), 2, (1, 2, 4))
    assert wanted == [(1, 2), (4, 1)]
    own = measured(wanted)
    # (1, 2): 1.336 [1.296, 1.376] against [1.54, 1.60]; (4, 1): 0.900 [0.873, 0.927]
    # against [1.04, 1.08]: neither overlaps -> the other depths at c = 1 and 4
    steps = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 12, decided=best)
    assert steps[1].disagree == ((1, 2), (4, 1))
    assert set(steps[1].points) == {(1, 1, -1), (1, 3, -1), (4, 2, -1), (4, 3, -1)}
    own.update(measured([(1, 1), (1, 3), (4, 2), (4, 3)]))
    last = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 12, decided=best)[-1]
    assert last.stop == CONFIRMED and last.disagree == ((1, 2), (4, 1))
    settled = settle(best, own, wanted, last.disagree)
    # c=1: measured 1.275, 1.336, 1.275, all above 1 -> depth 2, measured; c=2: no confirming
    # cell, the prediction's depth 2; c=4: measured 0.900, 0.891, 0.816 -> the baseline,
    # where the surface alone chose depth 1
    assert settled == {1: (2, "measured"), 2: (2, "predicted"), 4: (0, "measured")}
    part = {"speculative_disable_above_batch": None, "status": "predicted",
            "statement": "no crossover"}
    rec = recommendation(settled, part, {}, "coding", {}, 0.0)
    assert rec["schedule"] == [[1, 2], [4, 0]]
    assert [t["status"] for t in rec["tiers"]] == ["predicted", "measured"]


def test_a_depth_zero_tier_is_judged_against_depth_zero_measured():
    settled = {1: (2, "confirmed"), 2: (2, "predicted"), 4: (0, "predicted"),
               8: (0, "predicted")}
    part = {"speculative_disable_above_batch": 2, "depth": 2, "status": "predicted",
            "statement": ""}
    # depth 0 against the baseline: 0.95x at c=4 (holds 1), 0.87x [0.85, 0.89] at c=8
    zero = {1: (0.97, 0.95, 0.99), 4: (0.95, 0.9, 1.01), 8: (0.87, 0.85, 0.89)}
    rec = recommendation(settled, part, {}, "coding", zero, 0.0)
    # the tier from 4 runs depth 0 at 4 and 8: judged at its lowest, c=8, surely slower
    assert rec["tiers"][1]["depth_zero"] == {"load": 8, "speedup": 0.87,
                                             "interval": [0.85, 0.89], "verdict": "slower"}
    assert "depth_zero" not in rec["tiers"][0]
    assert rec["threshold"]["depth_zero"]["load"] == 8  # above the threshold 2: c=4 and 8
    assert rec["text"] == ("for coding: set speculative_disable_above_batch=2 at depth 2 "
                           "(predicted; speculation configured above it runs depth 0: 0.87x "
                           "[0.85, 0.89] of the baseline at c=8, slower); by batch size: "
                           "depth 2 from batch 1 (predicted), baseline from batch 4 (predicted; "
                           "speculation configured there runs depth 0: 0.87x [0.85, 0.89] of "
                           "the baseline at c=8, slower)")
    # a schedule that never drafts is the baseline server itself: nothing to judge
    off = recommendation({1: (0, "predicted")}, {**part, "speculative_disable_above_batch": None,
                                                 "statement": "none"}, {}, "coding", zero, 0.0)
    assert "depth_zero" not in off["tiers"][0]


def test_the_threshold_is_confirmed_at_it_and_just_above_it_with_the_switch_applied():
    assert switch_loads(4, LATTICE) == (4, 8) == switch_loads(5, LATTICE)
    # no threshold, speculation off (0), or nothing above it on the lattice: nothing to confirm
    assert switch_loads(None, LATTICE) == switch_loads(0, LATTICE) == switch_loads(16, LATTICE)
    assert switch_loads(16, LATTICE) == ()
    at = (4, (1.20, 1.12, 1.28))
    # the simulator's switch: 0.96 of the baseline above it, the interval's low end 0.955 at or
    # above 1 - 5 % (min_effect): it switches off -> confirmed
    found = switch_verdict(4, at, (8, (0.96, 0.955, 0.965)), 0.05, 0.0)
    assert (found["verdict"], found["at"]["verdict"], found["above"]["verdict"]) == (
        "confirmed", "faster", "about the baseline")
    assert found["text"] == ("confirmed with speculative_disable_above_batch=4 applied: 1.20x "
                             "[1.12, 1.28] of the baseline at c=4 (faster), 0.96x [0.95, 0.96] "
                             "at c=8 above it (within 5 % of it)")
    # a switch that does not switch off (0.64 [0.62, 0.66] above it): contradicted
    assert switch_verdict(4, at, (8, (0.64, 0.62, 0.66)), 0.05, 0.0)["verdict"] == "contradicted"
    # slower at T itself (where a real switch may thrash): contradicted
    assert switch_verdict(4, (4, (0.9, 0.85, 0.95)), (8, (1.0, 0.98, 1.02)), 0.05, 0.0)[
        "verdict"] == "contradicted"
    # 2 % between repeats: above it 0.96 - sqrt(0.005^2 + (1.96 x 0.02 x sqrt(2) x 0.96)^2) =
    # 0.96 - 0.0534 = 0.9066, below 0.95: it may cost more than 5 % -> undetermined; at c=4
    # 1.20 - sqrt(0.08^2 + 0.0665^2) = 1.096, still faster
    found = switch_verdict(4, at, (8, (0.96, 0.955, 0.965)), 0.05, 0.02)
    assert (found["verdict"], found["at"]["verdict"], found["above"]["verdict"]) == (
        "undetermined", "faster", "undetermined")
    assert found["above"]["interval"][0] == pytest.approx(0.9066, abs=1e-4)
    # no spread between repeats stated: no sign counts, the within-run readings beside it
    found = switch_verdict(4, at, (8, (0.96, 0.955, 0.965)), 0.05, None)
    assert found["verdict"] == "undetermined (within-run noise only)"
    assert found["above"]["verdict"] == "about the baseline"


def test_the_switch_is_measured_within_the_confirmations_budget_before_it_stops():
    last = ConfirmStep(7, "2 of 2 confirming cell(s) agree with the prediction", (), 43,
                       CONFIRMED)
    points = [switch_point(4, 3, 4), switch_point(8, 3, 4)]
    # SWITCH - 4, below every other drafter's index
    assert points == [(4, 3, -1_000_004), (8, 3, -1_000_004)]
    first = switch_steps(last, points, set(), 5, 4)
    assert len(first) == 1 and first[0].stop is None and first[0].points == tuple(points)
    assert first[0].why == ("confirm speculative_disable_above_batch=4 with the switch applied, "
                            "at c=4 and c=8")
    done = switch_steps(last, points, set(points), 5, 4)
    assert [(s.number, s.stop, s.cells_before) for s in done] == [(7, None, 43),
                                                                  (8, CONFIRMED, 45)]
    # one cell left: half a confirmation confirms nothing; the stop says so
    cut = switch_steps(last, points, set(), 1, 4)
    assert len(cut) == 1 and cut[0].stop == CONFIRMED and cut[0].points == ()
    assert cut[0].why.endswith("does not fit grid.search.confirm_cells (1 left)")


def test_without_a_spread_between_repeats_the_threshold_is_not_stated_as_an_answer():
    settled = {1: (3, "confirmed"), 4: (3, "confirmed"), 8: (0, "predicted")}
    part = {"speculative_disable_above_batch": 4, "depth": 3, "status": "confirmed",
            "statement": ""}
    switch = {"text": "confirmed with ..."}
    rec = recommendation(settled, part, {}, "coding", {}, None, switch)
    assert rec["threshold"]["speculative_disable_above_batch"] is None
    assert rec["threshold"]["within_run"] == 4
    # an undetermined threshold's reasons are signs too: the caveat comes first
    none = recommendation(settled, {"speculative_disable_above_batch": None, "status":
                                    "predicted", "statement": "undetermined: slower at c=2",
                                    "verdict": "undetermined"}, {}, "coding", {}, None)
    assert none["text"].startswith("for coding: undetermined (within-run noise only): one "
                                   "repeat per cell and no grid.search.repeat_spread stated "
                                   "(the between-repeat sd a run on this node with "
                                   "grid.axes.repeat=[0,1,2] prints), so no sign counts; the "
                                   "within-run intervals alone say: "
                                   "undetermined: slower at c=2; by batch size")
    assert none["threshold"]["within_run_verdict"] == "undetermined"
    assert rec["threshold"]["verdict"] == "undetermined (within-run noise only)"
    assert rec["text"].startswith(
        "for coding: undetermined (within-run noise only): one repeat per cell and no "
        "grid.search.repeat_spread stated (the between-repeat sd a run on this node with "
        "grid.axes.repeat=[0,1,2] prints), so no sign counts; the within-run intervals alone "
        "give speculative_disable_above_batch=4 at depth 3 (confirmed; confirmed with ...)")
    stated = recommendation(settled, part, {}, "coding", {}, 0.06, switch)
    assert stated["threshold"]["speculative_disable_above_batch"] == 4
    assert stated["text"].startswith("for coding: set speculative_disable_above_batch=4 at "
                                     "depth 3 (confirmed; confirmed with ...)")


def test_a_switched_point_is_never_read_as_another_drafters_and_back():
    # the other drafters take OWN - 1 - i (-2, -3, ...); a switched point SWITCH - T: with 3
    # drafters and thresholds 1..64 the two sets of indices share nothing
    drafters = [rung(i) for i in range(3)]
    switches = [switch_point(1, 3, t)[2] for t in (1, 2, 4, 64)]
    assert drafters == [-2, -3, -4]
    assert all(is_rung(r) and switched(r) is None for r in drafters)
    assert [switched(r) for r in switches] == [1, 2, 4, 64]
    assert not any(is_rung(r) for r in switches)


def test_the_best_single_depth_is_confirmed_where_it_stops_paying():
    # The forced chain's surface at c = 1, 2, 4, 8, replicates +-2 %; a = (0.8, 0.5, 0.5):
    # AL = 1.8, 2.2 at k = 1, 2. k=1: 1.5, 1.2, 1.059, 1.029 [1.008, 1.049] (pays at all four);
    # k=2: 1.571, 1.222, 1.048 [1.027, 1.069], 0.957 (stops after c=4); k=3 stops after c=2.
    # One depth for every load: k=2's (1.571 x 1.222 x 1.048) = 2.2 ** 3 / (1.4 x 1.8 x 2.1)
    # = 2.0121 -> ** (1/4) = 1.191x against k=1's 1.8 ** 4 / (1.2 x 1.5 x 1.7 x 1.75) =
    # 1.9604 -> 1.183x: depth 2, deciding at c = 4 (pays) and c = 8 (stops)
    spread = np.linspace(0.98, 1.02, 41)
    surface = {(1, 1): 1.2, (1, 2): 1.4, (1, 3): 1.6, (2, 1): 1.5, (2, 2): 1.8, (2, 3): 2.1,
               (4, 1): 1.7, (4, 2): 2.1, (4, 3): 2.5, (8, 1): 1.75, (8, 2): 2.3, (8, 3): 2.8}
    costs = {key: Cost(*key, c, c * spread) for key, c in surface.items()}
    preds = predict(costs, DomainProfile("coding", (0.8, 0.5, 0.5), (0.8, 0.4, 0.2)))
    single = single_depth({key: (p.speedup, *p.interval) for key, p in preds.items()})
    assert single is not None and (single["depth"], single["last"], single["next"]) == (2, 4, 8)
    assert single["mean_speedup"] == pytest.approx(1.191, abs=1e-3)
    assert single_cells(single) == [(4, 2), (8, 2)]
    assert single_cells(None) == []
    best = best_depths(preds)
    assert best == {1: 2, 2: 2, 4: 1, 8: 1}  # the schedule's: depth 2, then 1 from c=4
    wanted = list(dict.fromkeys(targets(depth_schedule(best), (), 2, (1, 2, 4, 8))
                                + single_cells(single)))
    assert wanted == [(1, 2), (4, 1), (4, 2), (8, 2)]
    predicted = {key: (p.speedup, *p.interval) for key, p in preds.items()}
    # its cells measured beside the prediction (4, 2: 1.04 [1.01, 1.07]; 8, 2: 0.95 [0.93,
    # 0.97] against 0.957 [0.938, 0.976]) agree: confirmed
    own = {(1, 2): (1.56, 1.52, 1.60), (4, 1): (1.06, 1.04, 1.08), (4, 2): (1.04, 1.01, 1.07),
           (8, 2): (0.95, 0.93, 0.97)}
    last = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 12, decided=best)[-1]
    assert last.stop == CONFIRMED and last.disagree == ()
    assert single_status(single, wanted, last.disagree)["status"] == "confirmed"
    # the drafter's own cell at c=4 k=2 at 0.89 [0.86, 0.92], below the predicted [1.03, 1.07]:
    # it disagrees, the own cells at c=4 are measured, and the single depth is contradicted
    own[(4, 2)] = (0.89, 0.86, 0.92)
    steps = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 12, decided=best)
    assert steps[1].points == ((4, 3, -1),) and steps[1].disagree == ((4, 2),)
    own[(4, 3)] = (0.8, 0.78, 0.82)
    last = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 12, decided=best)[-1]
    status = single_status(single, wanted, last.disagree)
    assert status == {**single, "status": "contradicted"}
    # chosen again with the drafter's own cells where measured: k=1 1.5, 1.2 (predicted), 1.06
    # (own), 1.0286 (predicted, 1.8 / 1.75): ln sum 0.405465 + 0.182322 + 0.058269 + 0.028171
    # = 0.674227 -> exp(/4) = 1.1836x to c=8; k=2 stops at c=2 (own 0.89 at c=4): 1.56 (own)
    # x 1.2222 -> exp(0.645392 / 4) = 1.1751x; k=3 (AL 2.4): 1.5 x 1.1429 -> 1.1441x: depth 1
    again = rechosen(status, predicted, own, {})
    assert again == {"depth": 1, "last": 8, "next": None, "mean_speedup": 1.1836,
                     "status": "measured", "instead_of": 2}
    # every depth measured below 1 at the lowest load: no single depth pays
    slow = {(1, k): (0.9, 0.88, 0.92) for k in (1, 2, 3)}
    assert rechosen(status, predicted, slow, {})["depth"] is None
    # with two cells of budget the schedule's decision points come first: the single depth's
    # are not measured, so it stays predicted
    first = confirm_steps(3, 30, wanted, own, predicted, (1, 2, 3), 2, decided=best)[0]
    asked = [(b, k) for b, k, _ in first.points]
    assert asked == [(1, 2), (4, 1)] and "only 2 of 4" in first.why
    assert single_status(single, asked, ())["status"] == "predicted"
    part = {"speculative_disable_above_batch": None, "status": "predicted",
            "statement": "no crossover"}
    rec = recommendation({1: (2, "confirmed"), 4: (1, "confirmed")}, part, {}, "coding", {},
                         0.0, None, single=status)
    assert rec["single"]["status"] == "contradicted"
    assert rec["text"].endswith("; at one depth for every batch size: depth 2, paying up to "
                                "batch 4 (contradicted)")
    rec = recommendation({1: (2, "confirmed"), 4: (1, "confirmed")}, part, {}, "coding", {},
                         0.0, None, single=again)
    assert rec["text"].endswith("depth 1, paying up to batch 8 (measured; depth 2 as predicted "
                                "was contradicted)")
