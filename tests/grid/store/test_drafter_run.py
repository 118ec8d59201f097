"""An earlier run folder read for its drafter's lengths (grid/store/drafter_run.py): real
Parquet through the results writer, and every refusal one line naming how it was given."""

from __future__ import annotations

import pytest

from grid.store.drafter_run import read_drafter_run
from tests.grid.analysis.synthetic import write_speculative_cells

NAMED = "breakeven.drafter_run=results/old"


def test_the_lengths_of_its_unforced_speculative_cells_per_domain(tmp_path):
    old = tmp_path / "old"
    write_speculative_cells(old, {
        # coding: 4 requests of 61 tokens in 24 verify steps each: 60 / 24 = 2.5
        "u1": ("eagle3", None, [("coding", 61, 24)] * 4 + [("math", 21, 5)] * 2),
        # forced at 3.5: not the drafter's acceptance
        "f1": ("eagle3__forced_len-3.5", 3.5, [("coding", 61, 17)] * 4),
        "b1": ("baseline", None, [("coding", 61, 0)] * 4)})
    run = read_drafter_run(old, NAMED)
    assert run.run_id == "old" and run.path == str(old.resolve())
    # math: 20 / 5 = 4.0; identical requests: the interval is the point
    assert run.lengths == {"eagle3": {"coding": (4, 2.5, 2.5, 2.5),
                                      "math": (2, 4.0, 4.0, 4.0)}}


def test_a_path_that_is_no_run_folder_is_one_line(tmp_path):
    (tmp_path / "notes").mkdir()
    for path in (tmp_path / "missing", tmp_path / "notes"):
        with pytest.raises(ValueError) as e:
            read_drafter_run(path, NAMED)
        assert str(e.value) == (f"{NAMED}: {path} is not a run folder (it holds no committed "
                                "cells)")


def test_a_run_without_unforced_speculative_cells_is_one_line(tmp_path):
    old = tmp_path / "old"
    write_speculative_cells(old, {"f1": ("eagle3__forced_len-3.5", 3.5, [("coding", 61, 17)]),
                                  "b1": ("baseline", None, [("coding", 61, 0)])})
    with pytest.raises(ValueError) as e:
        read_drafter_run(old, NAMED)
    assert str(e.value) == (f"{NAMED}: run old has no unforced speculative cell (requests with "
                            "verify steps counted) to measure the drafter's accept length from")
