"""Server groups that differ only in an engine option swept as an axis are told apart in the
progress lines and in the printed result table, and each variant is still compared with the
baseline measured under its own option: each cell's workload label names the option
(grid/plan/cells.py `workload_label`). Real Ray, real simulator servers."""

from __future__ import annotations

import pytest

from grid.loader import load_cells
from tests.grid.execute.smoke_runs import run_smoke

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]

HANGS = ("100000", "20")
"""Requests after which the simulator stops answering: the smoke sweep's 6 requests (+1
warm-up) per cell reach neither, so every cell is done."""


def test_groups_differing_in_an_engine_option_print_distinct_rows(tmp_path):
    outcome, out = run_smoke(tmp_path, "grid.axes.variant=[baseline,eagle3]",
                             "grid.axes.concurrency=[1]",
                             f"engine.options.hang_after_requests={','.join(HANGS)}")
    assert outcome.exit_code == 0, out
    labels = [f"coding__hang_after_requests-{hang}" for hang in HANGS]
    cells = load_cells(outcome.run_dir)
    assert sorted(zip(cells.variant, cells.workload, strict=True)) == [
        ("baseline", labels[0]), ("baseline", labels[1]),
        ("eagle3", labels[0]), ("eagle3", labels[1])]
    lines = out.splitlines()
    for variant in ("baseline", "eagle3"):
        for label in labels:
            # one progress line as the cell starts, one as it ends, each naming its option
            name = f"{variant} c=1 {label}"
            assert sum(f"] {name}: started" in line for line in lines) == 1, out
            assert sum(f"] {name}: done in" in line for line in lines) == 1, out
            # one row of the result table
            assert sum(line.split()[:3] == [variant, label, "c=1"] for line in lines) == 1, out
    # each option's eagle3 is compared with that option's baseline
    for label in labels:
        assert sum(line.startswith(f"eagle3 vs baseline on {label}: ") for line in lines) \
            == 1, out
