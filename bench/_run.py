"""What the benches that compare whole grids share: one `python -m grid.run` as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository: where `python -m grid.run` runs (its conf/ and packages)."""


def run_grid(overrides: list[str], folder: Path, run_id: str) -> tuple[float, Path, int]:
    """One `python -m grid.run` into `folder/run_id`: (wall seconds, run folder, exit code);
    its output is kept as `folder/<run_id>.log`."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grid.run", *overrides,
                           f"results_dir={folder.resolve()}", f"run.id={run_id}"],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    (folder / f"{run_id}.log").write_text(proc.stdout + proc.stderr)
    return wall, folder / run_id, proc.returncode
