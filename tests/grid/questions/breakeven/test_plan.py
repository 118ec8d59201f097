"""The break-even search in the plan (grid/questions/breakeven/__init__.py): its cells are the
dense grid's, and what it cannot search is one line. These compose real Hydra configs from conf/."""

from __future__ import annotations

import pytest

from grid.questions.breakeven.steps import BASELINE
from grid.run import make_plan
from tests.grid.plan.bad_input import assert_bad_input

SEARCH = ["variant=baseline,eagle3", "grid.search.kind=breakeven",
          "grid.search.concurrency=[1,16]", "grid.search.resolution=2"]


def test_the_searched_cells_are_the_dense_grids_cells(tmp_path):
    setup = make_plan([*SEARCH, f"results_dir={tmp_path}"]).search
    assert setup is not None
    # the default lengths: 9 from 1 to k + 1 = 4 (eagle3: 3 steps)
    assert setup.space.lengths == (1.0, 1.375, 1.75, 2.125, 2.5, 2.875, 3.25, 3.625, 4.0)
    assert setup.space.loads == (1, 2, 4, 8, 16) and setup.space.dense_cells == 50
    dense = make_plan(["variant=eagle3", "variant.forced_acceptance.length=1.375,4.0",
                       "load.concurrency=4", f"results_dir={tmp_path}"]).plan.cells
    by_label = {c.variant: c for c in dense}
    for i in (1, 8):
        cell = setup.points[(4, i)]
        twin = by_label[cell.variant]
        assert cell.cell_id == twin.cell_id and cell.server_key == twin.server_key
    base = make_plan(["variant=baseline", "load.concurrency=4", f"results_dir={tmp_path}"])
    assert setup.points[(4, BASELINE)].cell_id == base.plan.cells[0].cell_id


@pytest.mark.parametrize(("overrides", "message"), [
    (["variant.forced_acceptance.length=2,3"],
     "grid.search.kind=breakeven chooses the forced lengths itself"),
    (["grid.search.lengths=[1.0,5.0]"], "grid.search.lengths must be 2 or more ascending"),
    (["grid.search.lengths=[3.0,2.0]"], "grid.search.lengths must be 2 or more ascending"),
])
def test_what_the_search_cannot_take_is_one_line(overrides, message, tmp_path, capsys):
    assert_bad_input([*SEARCH, *overrides], message, tmp_path / "results", capsys)


def test_a_grid_without_a_speculative_variant_is_one_line(tmp_path, capsys):
    assert_bad_input(["variant=baseline,baseline", *SEARCH[1:]],
                     "compares one speculative variant with the baseline",
                     tmp_path / "results", capsys)
