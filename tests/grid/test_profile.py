"""`python -m grid.profile RUN` (grid/profile.py): a run's drafter's acceptance profile on
stdout, read back as a profile file; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from grid.analysis.surface import read_profile
from grid.profile import main
from grid.store.results import write_cell


def write_drafter_run(run_dir, histograms, variant="eagle3"):
    rows = [{"run_id": run_dir.name, "cell_id": "c1", "attempt": 1, "status": "ok",
             "request_id": f"r{i}", "domain": "coding", "accept_histogram": h}
            for i, h in enumerate(histograms)]
    write_cell(run_dir, variant=variant, workload="coding", cell_id="c1", attempt=1,
               requests=rows, cell_row={"run_id": run_dir.name, "cell_id": "c1", "attempt": 1,
                                        "status": "done", "concurrency": 1})


def test_a_runs_drafter_profile_is_written_and_read_back(tmp_path, capsys):
    run_dir = tmp_path / "run"
    # depth 2: [2, 1, 1] is 4 steps accepting 2 at position 1 and 1 at position 2; [0, 2, 2]
    # 4 steps, 4 and 2: a1 = 6 / 8 = 0.75, a2 = 3 / 6 = 0.5, AL(2) = 1 + 0.75 + 0.375
    write_drafter_run(run_dir, [[2, 1, 1], [0, 2, 2]])
    assert main([str(run_dir)]) == 0
    out = tmp_path / "p.json"
    out.write_text(capsys.readouterr().out)
    profile = read_profile(out)
    (coding,) = profile.domains.values()
    assert coding.conditional == pytest.approx((0.75, 0.5))
    assert coding.accept_length(2) == pytest.approx(2.125)
    assert json.loads(out.read_text())["source"] == str(run_dir)


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.startswith(f"specgrid: error: {tmp_path / 'nothing'} is not "
                                              "a run folder")
    run_dir = tmp_path / "run"
    write_drafter_run(run_dir, [[2, 1, 1]], variant="baseline")
    assert main([str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no done, unforced speculative cell" in err[0]
