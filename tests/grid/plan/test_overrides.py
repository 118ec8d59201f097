"""Fixed overrides of the grid's axes (grid/plan/overrides.py): `grid.axes.X=[...]` sets an
axis whether or not the grid has it, so the hint the report prints to add repeats runs on every
grid, one from the command line as well as a sweep's; each printed hint is taken from the
printed text and planned here."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from grid.analysis.decision import Decision
from grid.analysis.points import repeat_lines
from grid.plan.overrides import parse_overrides
from grid.report.answer import scope
from grid.run import make_plan

HINT = re.compile(r"grid\.axes\.\w+=\[[^\]]*\]")


def test_an_axis_override_is_force_added_and_reported_as_typed():
    line = parse_overrides(["grid.axes.repeat=[0,1,2]", "+grid.axes.concurrency=[4]",
                            "++grid.axes.rate=[1]", "load.requests_per_stream=2"])
    assert line.fixed == ["++grid.axes.repeat=[0,1,2]", "++grid.axes.concurrency=[4]",
                          "++grid.axes.rate=[1]", "load.requests_per_stream=2"]
    assert line.fixed_keys["grid.axes.repeat"] == "grid.axes.repeat=[0,1,2]"


def _printed_hints() -> list[str]:
    """Every override the report prints for adding repeats, cut from the printed lines: the
    decision's line on what the intervals cover, and a real engine's provisional answer."""
    lines = [*repeat_lines({"most": 1, "pooled_sd": None, "dof": 0, "disagreeing": []}),
             scope(Decision(pd.DataFrame(), pd.DataFrame(), [], [], {}, repeats={"most": 1}),
                   provisional=True)]
    hints = [h for line in lines for h in HINT.findall(line)]
    assert len(hints) == len(lines)  # each line prints one
    return sorted(set(hints))


@pytest.mark.parametrize(("grid", "cells"), [
    # the README's command-line grid: 2 variants x 3 loads
    (["variant=baseline,eagle3", "load.concurrency=1,8,64"], 6),
    # the default sweep, whose axes have repeat: [0]: 2 variants x 7 loads
    (["+sweep=concurrency"], 14),
    # a sweep without the axis: 2 variants x 1 workload x 2 loads
    (["+sweep=distribution", "grid.axes.workload=[coding]"], 4),
])
def test_every_printed_repeat_hint_plans_three_repeats_of_every_cell(grid, cells, tmp_path):
    for hint in _printed_hints():
        planned = make_plan([*grid, hint, f"results_dir={tmp_path}"]).plan.cells
        assert sorted(c.config["load"]["repeat"] for c in planned) == sorted([0, 1, 2] * cells)
