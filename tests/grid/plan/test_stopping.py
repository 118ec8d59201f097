"""Precision targets and the over-saturation stop in the plan (grid/plan/stopping.py): bad input
is one line before anything starts, the plan shows the target and the cap, the load generators
get them, cells planned before the keys existed keep their ids, and an adaptive search's cells
carry the target."""

from __future__ import annotations

import pytest

from grid.run import make_plan
from specgrid_metrics.precision import Target
from tests.grid.plan.bad_input import assert_bad_input

TARGET = "load.target={metric:output_tok_s,half_width:0.05}"


@pytest.mark.parametrize(("overrides", "message"), [
    (["load.target={metric:output_tok_s,half_width:0}"],
     "load.target: half_width of output_tok_s must be a fraction in (0, 1) (0.05 = ±5 %), got 0"),
    (["load.target={metric:output_tok_s,half_width:1}"], "must be a fraction in (0, 1)"),
    (["load.target={metric:output_tok_s,half_width:-0.05}"], "must be a fraction in (0, 1)"),
    (["load.target={metric:ttft_p50,half_width:1.5}"], "half_width of ttft_p50_s"),
    (["load.target={metric:goodput,half_width:0.1}"], "load.target: unknown metric 'goodput'"),
    (["load.target={metric:output_tok_s}"], "load.target must be {metric: NAME, half_width"),
    ([TARGET, "load.min_requests=16", "load.max_requests=8"],
     "load.max_requests=8 is below load.min_requests=16"),
    (["load.max_requests=64"], "load.max_requests=64 is the cap of a precision target"),
    ([TARGET, "load.num_requests=40"], "load.num_requests fixes a cell's count"),
    ([TARGET, "load.max_requests=0"], "load.max_requests must be >= 1, got 0"),
    (["load.check_interval_s=0"], "load.check_interval_s must be > 0, got 0"),
    ([TARGET, "workload=agentic_conversations"], "load.target applies to prompt workloads"),
])
def test_bad_stop_settings_are_one_line_before_anything_starts(overrides, message, tmp_path,
                                                                capsys):
    assert_bad_input(["variant=baseline", *overrides], message, tmp_path / "r", capsys)


def test_the_plan_shows_target_and_cap_and_the_clients_get_them(tmp_path):
    made = make_plan(["variant=baseline", "load.concurrency=1,8", TARGET,
                      "load.clients=2", "cluster.num_cpus=4", f"results_dir={tmp_path}"])
    plan = made.plan
    by_c = {c.concurrency: c for c in plan.cells}
    # no max_requests: 4 x the count without a target (min_requests 8 at c=1; 4 x 8 at c=8)
    assert by_c[1].num_requests == 32 and by_c[8].num_requests == 128
    from grid.plan.build import format_plan

    text = format_plan(plan)
    assert "requests<=32 until output_tok_s ±5 % (first check after 8)" in text
    for spec in plan.work(by_c[8]).clients:
        assert spec.targets == (Target("output_tok_s", 0.05),)
        assert spec.num_requests == 128 and spec.min_requests == 8
        assert spec.stop_over_saturated and spec.check_interval_s == 0.5
    capped = make_plan(["variant=baseline", TARGET, "load.max_requests=50",
                        f"results_dir={tmp_path}"]).plan
    assert capped.cells[0].num_requests == 50


def test_defaults_keep_cell_ids_and_a_target_makes_new_cells(tmp_path):
    def ids(*extra: str) -> list[str]:
        return [c.cell_id for c in make_plan(["+sweep=smoke", *extra,
                                              f"results_dir={tmp_path}"]).plan.cells]

    plain = ids()
    assert ids("load.check_interval_s=0.5", "load.stop_over_saturated=true") == plain
    targeted = ids("load.num_requests=null", TARGET)
    assert not set(targeted) & set(plain)
    assert ids("load.stop_over_saturated=false") != plain
    without = make_plan(["+sweep=smoke", "load.stop_over_saturated=false",
                         f"results_dir={tmp_path}"]).plan
    assert all(not s.stop_over_saturated and s.targets == ()
               for w in without.works.values() for s in w.clients)


def test_a_searched_cell_stops_at_the_target(tmp_path):
    # Every cell the speculation question may choose is an ordinary cell of the plan: each carries
    # the target and its cap in its load specs; the search's budget counts cells, not requests.
    made = make_plan(["+sweep=speculation", TARGET, f"results_dir={tmp_path}"])
    assert made.search is not None
    cells = made.plan.cells
    assert len(cells) > 10
    for cell in cells:
        (spec,) = made.plan.work(cell).clients
        assert spec.targets == (Target("output_tok_s", 0.05),)
        assert spec.num_requests == cell.num_requests
