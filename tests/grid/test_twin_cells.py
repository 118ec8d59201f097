"""A run's cells as the twin reads them (grid/twin.py): forced-acceptance cells are left
out, with the reason, since a twin fits the drafter's own acceptance; with --known-acceptance
each speculative cell's acceptance is what the engine counted, or what was forced."""

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
                       "fits the drafter's own acceptance; --known-acceptance fits the system "
                       "alone)"]


def test_known_acceptance_is_the_engines_count_or_the_forced_schedule(tmp_path):
    cells = synthetic.cells(truth(), [1, 8], noise=0.0)
    run = tmp_path / "run"
    write_run(run, cells, extra={
        # forced length 2.5, counted nowhere: 1 for the first draft, half for the second
        "eagle3-c8": {"forced_acceptance": json.dumps({"length": 2.5, "mean_length": 2.5})},
        # the engine counted its positions: taken as they are
        "eagle3-c1": {"acceptance_per_position": [0.9, 0.6, 0.3]}})
    kept, skipped = measured_cells(run, known=True)
    known = {c.cell_id: c.known_acceptance for c in kept}
    assert known == {"baseline-c1": None, "baseline-c8": None, "eagle3-c1": (0.9, 0.6, 0.3),
                     "eagle3-c8": (1.0, 0.5)}
    assert skipped == []


def test_known_acceptance_leaves_out_a_cell_whose_positions_were_not_counted(tmp_path):
    cells = synthetic.cells(truth(), [1, 8], noise=0.0)
    run = tmp_path / "run"
    write_run(run, cells)  # accept lengths, no per-position counts, nothing forced
    kept, skipped = measured_cells(run, known=True)
    assert sorted(c.cell_id for c in kept) == ["baseline-c1", "baseline-c8"]
    assert skipped == [f"eagle3-c{c} eagle3 coding: acceptance not counted per draft position "
                       "(--known-acceptance needs it)" for c in (1, 8)]
