"""The `repeat` axis: the same cell measured again under distinct cell ids."""

from __future__ import annotations

from grid.run import make_plan


def test_repeat_axis_gives_distinct_cells_with_the_same_config(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}", "grid.axes.repeat=[0,1,2]",
                         "grid.axes.concurrency=[4]", "grid.axes.variant=[eagle3]"])
    cells = planned.plan.cells
    assert len(cells) == 3 and len({c.cell_id for c in cells}) == 3
    assert [c.config["load"]["repeat"] for c in cells] == [0, 1, 2]
    assert [c.factors["repeat"] for c in cells] == [0, 1, 2]
    # one server for all repeats; everything but the repeat index is equal
    assert len({c.server_key for c in cells}) == 1
    strip = [{**c.config, "load": {k: v for k, v in c.config["load"].items() if k != "repeat"}}
             for c in cells]
    assert strip[0] == strip[1] == strip[2]


def test_without_the_axis_repeat_is_zero(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"])
    assert {c.config["load"]["repeat"] for c in planned.plan.cells} == {0}
