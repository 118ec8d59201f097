"""The relative step cost surface: the cost of a forced point, two lengths at one (B, k), the
decomposition per load, Leviathan's closed form."""

import json

import numpy as np
import pandas as pd
import pytest

from grid.analysis.cellstats import CellStats
from grid.analysis.surface import (
    Cost,
    ForcedPoint,
    Throughput,
    beside_leviathan,
    decompose,
    forced_points,
    length_checks,
    leviathan_speedup,
    step_cost,
    surface,
)


def tput(value, reps=None):
    return Throughput(value, np.array(reps if reps is not None else [value, value], dtype=float))


def test_step_cost_is_length_over_speedup_replicate_by_replicate():
    cost = step_cost(ForcedPoint(8, 3, 3.0, tput(150, [150, 120])), tput(100, [100, 90]))
    # 3 tokens per step at 1.5x the baseline's tok/s: a step costs 3 / 1.5 = 2 decode steps
    assert cost.value == pytest.approx(2.0)
    np.testing.assert_allclose(cost.reps, [2.0, 3 * 90 / 120])
    assert cost.interval[0] >= 2.0 and cost.interval[1] <= 2.25


def test_measured_length_replicates_move_with_the_throughput():
    point = ForcedPoint(8, 3, 3.0, tput(150, [150, 120]), np.array([3.0, 2.4]))
    np.testing.assert_allclose(step_cost(point, tput(100)).reps, [2.0, 2.4 * 100 / 120])


def test_two_lengths_at_one_point_give_one_cost_or_a_difference():
    base = {8: tput(100)}
    same = [ForcedPoint(8, 3, 2.0, tput(100)), ForcedPoint(8, 3, 3.0, tput(150))]
    (check,) = length_checks(same, base)
    assert (check.lengths, check.difference, check.agrees) == ((2.0, 3.0), 0.0, True)
    assert surface(same, base)[(8, 3)].value == pytest.approx(2.0)
    differ = [ForcedPoint(8, 3, 2.0, tput(80)), ForcedPoint(8, 3, 3.0, tput(150))]
    (check,) = length_checks(differ, base)
    # 2 / 0.8 = 2.5 at the shorter, 2.0 at the longer
    assert check.difference == pytest.approx(-0.5)
    assert not check.agrees
    assert surface(differ, base)[(8, 3)].value == pytest.approx(2.25)
    assert length_checks(same[:1], base) == []


def test_a_forced_point_without_its_baseline_is_refused():
    with pytest.raises(ValueError, match="no baseline measured at that load"):
        surface([ForcedPoint(8, 3, 2.0, tput(100))], {16: tput(100)})


def hand_surface(values):
    return {(b, k): Cost(b, k, c, np.full(4, c)) for (b, k), c in values.items()}


def test_decomposition_on_a_hand_built_surface():
    costs = hand_surface({(1, 1): 1.3, (1, 2): 1.45, (1, 3): 1.6,
                          (64, 1): 1.5, (64, 2): 2.0, (64, 3): 2.7, (256, 2): 3.0})
    parts = decompose(costs)
    one = parts[1]
    # a straight line c = 1.15 + 0.15 k: fixed 0.15, draft 0.15, no excess
    assert (one.fixed, one.draft) == (pytest.approx(0.15), pytest.approx(0.15))
    assert list(one.verify_excess.values()) == pytest.approx([0, 0, 0], abs=1e-12)
    assert one.draft_interval == pytest.approx((0.15, 0.15))
    wide = parts[64]
    # slope ((2.7 - 1.5) / 2) = 0.6, intercept mean(c) - 0.6 * 2 = 31/15 - 1.2 = 13/15
    assert wide.draft == pytest.approx(0.6)
    assert wide.fixed == pytest.approx(13 / 15 - 1)
    assert [wide.verify_excess[k] for k in (1, 2, 3)] == pytest.approx([1 / 30, -1 / 15, 1 / 30])
    assert parts[256] is None  # one depth: no line


def test_leviathan_closed_form_at_a_worked_example():
    # a = 0.8, k = 4, c = 0.05: (1 - 0.8^5) / (0.2 * (4 * 0.05 + 1)) = 0.67232 / 0.24
    assert leviathan_speedup(0.8, 4, 0.05) == pytest.approx(2.8013333)
    assert leviathan_speedup(1.0, 3, 0.1) == pytest.approx(4 / 1.3)
    # c = 0: the i.i.d. accept length 1 + a + a^2
    assert leviathan_speedup(0.5, 2, 0.0) == pytest.approx(1.75)


def test_leviathan_beside_the_surface_at_batch_one():
    costs = hand_surface({(1, 1): 1.3, (1, 2): 1.45})
    rows = beside_leviathan(costs, decompose(costs)[1], 0.8)
    # line through (1, 1.3), (2, 1.45): draft 0.15; k = 1: AL 1.8, surface 1.8 / 1.3,
    # Leviathan 1.8 / 1.15 (no fixed overhead in its model)
    assert rows[0] == pytest.approx({"depth": 1, "accept_length": 1.8, "surface": 1.8 / 1.3,
                                     "leviathan": 1.8 / 1.15})
    assert rows[1]["leviathan"] == pytest.approx(2.44 / 1.3)


def test_forced_points_from_a_run_pair_each_honoured_cell_with_its_baseline():
    args = json.dumps({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3})
    rows, reps = [], {}

    def cell(cid, variant, c, tok_s, length=None, measured=None):
        forced = None if length is None else json.dumps({"length": length,
                                                         "mean_length": length})
        rows.append({"cell_id": cid, "variant": variant, "workload": "coding",
                     "concurrency": c, "rate": np.nan, "status": "done", "output_tok_s": tok_s,
                     "forced_acceptance": forced, "server_args": None if length is None
                     else args, "accept_length_decode": measured or length})
        reps[cid] = {"output_tok_s": np.array([tok_s, tok_s * 1.1])}

    for c, (at2, at3) in {1: (160.0, 240.0), 8: (100.0, 150.0)}.items():
        cell(f"b{c}", "baseline", c, 100.0)
        cell(f"f{c}-2", "eagle3__forced_len-2.0", c, at2, 2.0)
        # at c=8 the engine gave 2.0 where 3.0 was forced: not honoured, left out
        cell(f"f{c}-3", "eagle3__forced_len-3.0", c, at3, 3.0, 2.0 if c == 8 else None)
    cells = pd.DataFrame(rows)
    stats = CellStats(cells.drop(columns="forced_acceptance"), reps)
    ((key, (forced, baselines)),) = forced_points(stats, cells).items()
    assert key == ("eagle3", "coding")
    assert sorted((p.load, p.depth, p.length) for p in forced) == [
        (1, 3, 2.0), (1, 3, 3.0), (8, 3, 2.0)]
    assert {b: t.value for b, t in baselines.items()} == {1: 100.0, 8: 100.0}
    costs = surface(forced, baselines)
    # c=1: 2 x 100 / 160 = 3 x 100 / 240 = 1.25; c=8: 2 x 100 / 100 = 2
    assert {k: c.value for k, c in costs.items()} == pytest.approx({(1, 3): 1.25, (8, 3): 2.0})
    (check,) = length_checks(forced, baselines)
    assert (check.load, check.difference) == (1, pytest.approx(0.0))


def test_own_points_cost_the_drafters_unforced_cells_at_their_measured_length():
    args = json.dumps({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3})
    rows = [{"cell_id": cid, "variant": v, "workload": "coding", "concurrency": c,
             "rate": np.nan, "status": "done", "output_tok_s": t, "forced_acceptance": forced,
             "server_args": None if v == "baseline" else args.replace("3", "0" if cid == "z4"
                                                                      else "3"),
             "accept_length_decode": length}
            for cid, v, c, t, forced, length in [
                ("b1", "baseline", 1, 100.0, None, None),
                ("o1", "eagle3__speculative_num_steps-3", 1, 150.0, None, 2.7),
                ("f1", "eagle3__forced_len-3.0", 1, 240.0,
                 json.dumps({"length": 3.0, "mean_length": 3.0}), 3.0),
                ("b4", "baseline", 4, 200.0, None, None),
                # no length measured: no point
                ("o4", "eagle3__speculative_num_steps-3", 4, 210.0, None, None),
                # depth 0 (no drafts): one token a step, L = 1 whatever is recorded
                ("z4", "eagle3__speculative_num_steps-0", 4, 160.0, None, None)]]
    cells = pd.DataFrame(rows)
    reps = {r["cell_id"]: {"output_tok_s": np.array([r["output_tok_s"]] * 2)} for r in rows}
    stats = CellStats(cells.drop(columns="forced_acceptance"), reps)
    own, baselines = [], {}
    for points, base in forced_points(stats, cells, own=True).values():
        own += points
        baselines.update(base)
    # only the unforced cell with its length: c = 2.7 x 100 / 150 = 1.8 (the forced cell at
    # c=1 left to forced_points without `own`)
    assert sorted((p.load, p.depth, p.length) for p in own) == [(1, 3, 2.7), (4, 0, 1.0)]
    # c(4, 0) = 1 x 200 / 160 = 1.25
    assert {k: c.value for k, c in surface(own, baselines).items()} == pytest.approx(
        {(1, 3): 1.8, (4, 0): 1.25})
    ((_, (forced, _)),) = forced_points(stats, cells).items()
    assert [(p.load, p.length) for p in forced] == [(1, 3.0)]


def test_a_length_that_matters_widens_the_intervals_of_the_loads_nearest_its_check():
    from grid.analysis.surface import Cost, LengthCheck, widened

    flat = np.full(5, 2.0)
    costs = {(1, 1): Cost(1, 1, 2.0, flat), (2, 1): Cost(2, 1, 2.0, flat),
             (16, 1): Cost(16, 1, 2.0, flat)}
    checks = [LengthCheck(1, 1, (2.0, 2.8), 0.2, 0.1, 0.3),      # depends: 0.2 / 2.0 = 10 %
              LengthCheck(16, 1, (2.0, 2.8), 0.02, -0.05, 0.09)]  # one cost
    out, rel = widened(costs, checks)
    # c=1 and c=2 (nearer 1 than 16 in log load) spread by up to ±10 %: 2 x (1 + 0.1 u),
    # u = -1 -0.5 0 0.5 1; c=16 as it was
    assert rel == {1: pytest.approx(0.1), 2: pytest.approx(0.1)}
    for b in (1, 2):
        np.testing.assert_allclose(sorted(out[(b, 1)].reps), [1.8, 1.9, 2.0, 2.1, 2.2])
        assert out[(b, 1)].value == 2.0
    np.testing.assert_array_equal(out[(16, 1)].reps, flat)
    assert widened(costs, checks[1:]) == (costs, {})
