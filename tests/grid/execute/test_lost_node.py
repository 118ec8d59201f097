"""A node lost mid-run (ray.cluster_utils.Cluster, the node removed while a cell runs on it):
its cells fail with the reason, the run ends instead of hanging, and once a node is back the
same command resumes to completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grid.run import EXIT_FAILED_CELLS

DRIVER = Path(__file__).with_name("lost_node_driver.py")
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_lost_node_fails_its_cells_and_a_resume_completes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(DRIVER), str(tmp_path)], capture_output=True,
                          text=True, timeout=280, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(lines[-1])
    assert result["removed"]
    assert result["first_exit"] == EXIT_FAILED_CELLS
    first, second = result["first_errors"]
    assert "died" in first  # the cell running on the lost node
    assert "could not be scheduled" in second  # nothing could take the node's place
    assert result["second_exit"] == 0
    assert result["second_status"] == ["done", "done"]
    assert result["second_attempts"] == [2, 2]
