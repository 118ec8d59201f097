"""A run id is one folder name inside results_dir: one that would put the run folder anywhere
else is refused by the plan with one line and exit 2, and nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grid.run import EXIT_BAD_INPUT, make_plan
from tests.grid.plan.bad_input import assert_bad_input


@pytest.mark.parametrize(("run_id", "problem"), [
    ("../../escape", "holds a path separator"),
    ("a/b", "holds a path separator"),
    ("..", "starts with '.'"),
    (".hidden", "starts with '.'"),
    ("''", "is empty"),  # `run.id=''`: Hydra's empty string
])
def test_a_run_id_that_is_not_a_folder_name_is_refused(run_id, problem, tmp_path, capsys):
    results = tmp_path / "a" / "b" / "results"
    shown = "" if run_id == "''" else run_id  # the value Hydra composes
    assert_bad_input(["+sweep=smoke", f"run.id={run_id}"], f"run.id {shown!r} {problem}",
                     results, capsys)
    # `../../escape` from results_dir is tmp_path/a/escape: nothing anywhere under tmp_path.
    assert list(tmp_path.rglob("*")) == []


def test_the_command_exits_2_with_one_line_and_writes_nothing(tmp_path):
    results = tmp_path / "x" / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "grid.run", "+sweep=smoke", "run.id=../../escape",
         f"results_dir={results}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.strip().splitlines() == [
        "specgrid: error: run.id '../../escape' holds a path separator: a run id is the name "
        "of one folder inside results_dir"]
    assert list(tmp_path.rglob("*")) == []


def test_a_plain_name_is_the_folder_inside_results_dir(tmp_path: Path):
    plan = make_plan(["+sweep=smoke", "run.id=my-run_2.v1", f"results_dir={tmp_path}"]).plan
    assert plan.run_dir == tmp_path / "my-run_2.v1"
