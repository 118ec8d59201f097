"""Stopping and resuming a real driver process (`python -m grid.run`): SIGTERM/SIGINT stop the
servers and exit 130 with the resume command; after SIGKILL the next start kills what the dead
driver left and resumes; killed at random points and resumed, a sweep ends with exactly the
cells and rows of an uninterrupted run (compared row by row with one)."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from grid.loader import load_cells, load_requests
from grid.run import EXIT_INTERRUPTED, run

SWEEP = ["+sweep=smoke", "run.id=r"]


def _default_sigint() -> None:
    # A shell's background job starts with SIGINT ignored, and Python keeps an inherited
    # SIG_IGN instead of raising KeyboardInterrupt: the driver starts as from a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _driver(results: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "grid.run", *SWEEP, f"results_dir={results}", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_default_sigint)


def _query(run_dir: Path, sql: str) -> list[tuple]:
    try:
        with sqlite3.connect(run_dir / "_ledger.sqlite", timeout=10) as db:
            return db.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []


def _wait_for(run_dir: Path, sql: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _query(run_dir, sql):
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {sql}")


def _server_pids(run_dir: Path) -> list[int]:
    return [pid for (pid,) in _query(run_dir, "SELECT pid FROM servers")]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


_KEY = ["cell_id", "variant", "request_id", "prompt_id", "domain", "status", "output_tokens"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, ray_session) -> pd.DataFrame:
    """The requests an uninterrupted smoke run leaves (what each request was, not timings)."""
    results = tmp_path_factory.mktemp("reference")
    assert run([*SWEEP, f"results_dir={results}"], echo=lambda line: None).exit_code == 0
    return _identity(load_requests(results / "r"))


def _identity(requests: pd.DataFrame) -> pd.DataFrame:
    out = requests[_KEY].astype({"variant": str})
    return out.sort_values(["cell_id", "request_id"]).reset_index(drop=True)


def _assert_complete(run_dir: Path, reference: pd.DataFrame) -> None:
    """Exactly what an uninterrupted smoke run leaves: the same cells, the same requests
    (ids, prompts, outputs), each once, the latest attempt of every cell done, no server
    alive."""
    requests = load_requests(run_dir)
    pd.testing.assert_frame_equal(_identity(requests), reference)
    assert (requests.status == "ok").all()
    cells = load_cells(run_dir)
    assert sorted(cells.cell_id) == sorted(reference.cell_id.unique())
    assert (cells.status == "done").all()
    # A plain pandas read of the folder sees the same rows: no uncommitted or old attempt.
    pd.testing.assert_frame_equal(_identity(pd.read_parquet(run_dir / "requests")), reference)
    assert [r[0] for r in _query(run_dir, "SELECT status FROM cells")] == ["done"] * 4
    assert not [pid for pid in _server_pids(run_dir) if _alive(pid)]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_servers_and_prints_resume(sig, tmp_path, ray_session, reference):
    driver = _driver(tmp_path)
    run_dir = tmp_path / "r"
    _wait_for(run_dir, "SELECT 1 FROM cells WHERE status='done'")
    driver.send_signal(sig)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == EXIT_INTERRUPTED, out
    assert f"interrupted; resume with: python -m grid.run --resume {run_dir.resolve()}" in out
    assert not _query(run_dir, "SELECT 1 FROM cells WHERE status='running'")
    assert not _query(run_dir, "SELECT 1 FROM servers WHERE stopped_at IS NULL")
    assert not [pid for pid in _server_pids(run_dir) if _alive(pid)]
    # Resume with the same command (in this process, on the test session's Ray).
    assert run([*SWEEP, f"results_dir={tmp_path}"], echo=lambda line: None).exit_code == 0
    _assert_complete(run_dir, reference)


@pytest.mark.slow
def test_sigkill_then_resume_completes(tmp_path, ray_session, reference):
    """The driver is SIGKILLed mid-cell; the next start marks the cell interrupted and runs
    it again (the leftover-kill path itself: tests/grid/store/test_record.py)."""
    driver = _driver(tmp_path)
    run_dir = tmp_path / "r"
    _wait_for(run_dir, "SELECT 1 FROM cells WHERE status='running'")
    _wait_for(run_dir, "SELECT 1 FROM servers")
    driver.kill()
    driver.wait()
    lines: list[str] = []
    assert run([*SWEEP, f"results_dir={tmp_path}"], echo=lines.append).exit_code == 0
    assert any("marked interrupted" in line for line in lines)
    _assert_complete(run_dir, reference)


@pytest.mark.slow
def test_killed_at_random_points_resumes_to_the_same_result(tmp_path, ray_session, reference):
    rng = random.Random(20261129)
    run_dir = tmp_path / "r"
    for _ in range(3):
        driver = _driver(tmp_path)
        _wait_for(run_dir, "SELECT 1 FROM servers WHERE stopped_at IS NULL")
        time.sleep(rng.uniform(0.0, 3.0))  # somewhere inside a server's life: mid-cell
        driver.kill()
        driver.wait()
    final = _driver(tmp_path)
    out, _ = final.communicate(timeout=300)
    assert final.returncode == 0, out
    _assert_complete(run_dir, reference)
    attempts = [a for (a,) in _query(run_dir, "SELECT attempts FROM cells")]
    assert max(attempts) >= 2  # at least one cell really was interrupted and re-run
