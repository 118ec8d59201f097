"""Ray started by the driver (grid/execute/cluster.py `connect`): its own lines (start-up,
token authentication) go to the Ray session's logs, never to the driver's terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grid.execute.cluster import RAY_LOG

REPO = Path(__file__).resolve().parents[3]
RAY_LINE = re.compile(r"\t(DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+\.py:\d+ -- ")
"""Ray's own log format (ray/_private/log.py): `<time>\\tINFO worker.py:2038 -- ...`."""


@pytest.mark.slow
def test_the_driver_prints_specgrids_lines_only(tmp_path):
    started = time.time()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "grid.run", "+sweep=smoke", "grid.axes.variant=[baseline]",
         "grid.axes.concurrency=[1]", f"results_dir={tmp_path}"],
        capture_output=True, text=True, timeout=280, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert any(line.startswith("[1/1] baseline c=1 coding: done") for line in lines)
    ray_lines = [line for line in lines if RAY_LINE.search(line)
                 or "Ray instance" in line or "authentication token" in line
                 or "Token authentication" in line]
    assert ray_lines == []
    # they went to the session's logs instead
    kept = [p for p in Path(tempfile.gettempdir(), "ray").glob(f"session_*/logs/{RAY_LOG}")
            if p.stat().st_mtime >= started]
    assert any("Started a local Ray instance" in p.read_text() for p in kept), kept
