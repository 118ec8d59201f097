"""A run's cells as the twin reads them (grid/twin.py): forced-acceptance cells are left
out, with the reason, since a twin fits the drafter's own acceptance."""

from __future__ import annotations

import json

from engines.sim.twin import synthetic
from grid.twin import measured_cells
from tests.engines.sim.twin.ground_truth import truth
from tests.grid.twin_run import write_run


def test_a_forced_cell_is_left_out_with_its_reason(tmp_path):
    cells = synthetic.cells(truth(), [1, 8], noise=0.0)
    run = tmp_path / "run"
    forced = json.dumps({"length": 2.5, "mean_length": 2.5})
    write_run(run, cells, extra={"eagle3-c8": {"forced_acceptance": forced}})
    kept, skipped = measured_cells(run)
    assert sorted(c.cell_id for c in kept) == ["baseline-c1", "baseline-c8", "eagle3-c1"]
    assert skipped == ["eagle3-c8 eagle3 coding: forced acceptance: performance only (a twin "
                       "fits the drafter's own acceptance)"]
