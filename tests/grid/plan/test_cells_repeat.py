"""The `repeat` axis: the same cell measured again under distinct cell ids."""

from __future__ import annotations

import pytest

from grid.plan.build import estimate_run, format_plan
from grid.plan.estimate import RUN_OVERHEAD_S
from grid.run import make_plan


def test_repeat_axis_gives_distinct_cells_with_the_same_config(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}", "grid.axes.repeat=[0,1,2]",
                         "grid.axes.concurrency=[4]", "grid.axes.variant=[eagle3]"])
    cells = planned.plan.cells
    assert len(cells) == 3 and len({c.cell_id for c in cells}) == 3
    assert [c.config["load"]["repeat"] for c in cells] == [0, 1, 2]
    assert [c.factors["repeat"] for c in cells] == [0, 1, 2]
    # one server configuration for all repeats; everything but the repeat index is equal
    assert len({c.server_key for c in cells}) == 1
    strip = [{**c.config, "load": {k: v for k, v in c.config["load"].items() if k != "repeat"}}
             for c in cells]
    assert strip[0] == strip[1] == strip[2]


def test_without_the_axis_repeat_is_zero(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"])
    assert {c.config["load"]["repeat"] for c in planned.plan.cells} == {0}


def test_each_repeat_is_a_fresh_server_in_alternating_order(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}", "grid.axes.repeat=[0,1,2]",
                         "grid.axes.concurrency=[4]", "engine.options.speed_jitter=0.1"])
    plan = planned.plan
    assert [(g.repeat, g.variant) for g in plan.groups] == [
        (0, "baseline"), (0, "eagle3"), (1, "eagle3"), (1, "baseline"), (2, "baseline"),
        (2, "eagle3")]
    assert len(plan.launches) == 2  # one launch per configuration, a seed per start
    text = format_plan(plan)
    assert ("server order (a fresh server per repeat, the order reversed every other repeat): "
            "repeat 0: baseline, eagle3; repeat 1: eagle3, baseline; repeat 2: baseline, "
            "eagle3") in text
    assert "6 cells in 6 server groups" in text and "server 3: eagle3 repeat 1 [sim]" in text
    seeds = [line.split("--sim-start-seed ")[1].split()[0] for line in text.splitlines()
             if "command:" in line]
    assert len(seeds) == 6 and len(set(seeds)) == 6
    # The estimate counts a start per group: three repeats cost three times one repeat,
    # starts included (one shared start would cost 3 x cells + 1 x starts).
    one = make_plan(["+sweep=smoke", f"results_dir={tmp_path}", "grid.axes.repeat=[0]",
                     "grid.axes.concurrency=[4]", "engine.options.speed_jitter=0.1"]).plan
    three, single = estimate_run(plan).seconds, estimate_run(one).seconds
    assert three is not None and single is not None
    assert three - RUN_OVERHEAD_S == pytest.approx(3 * (single - RUN_OVERHEAD_S))
