"""specgrid installed the ordinary way (a wheel, not an editable checkout) runs from any
directory: the Hydra configs (conf/), the prompt sets (workloads/prompts/) and the
simulator's profiles come along as package data, and results go to ./results of the working
directory.

Offline: the wheel is built with this environment's setuptools (no build isolation) and
installed without dependencies into a fresh virtual environment that sees this environment's
site-packages through a .pth line (so the source checkout is NOT importable there: a path line
in a .pth does not run the editable install's own .pth hook)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from grid.loader import load_cells

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "conf", "grid", "actors", "engines", "workloads",
           "specgrid_metrics")


def _can_build_wheels() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the `wheel` package."""
    try:
        if Version(metadata.version("setuptools")) >= Version("70.1"):
            return True
        metadata.version("wheel")
        return True
    except metadata.PackageNotFoundError:
        return False


def _check(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
@pytest.mark.skipif(not _can_build_wheels(),
                    reason="this environment's setuptools cannot build a wheel offline "
                           "(needs >= 70.1 or the wheel package; the test extra installs it)")
def test_wheel_installed_in_a_fresh_venv_runs_the_smoke_sweep(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so"))
        else:
            shutil.copy2(REPO / name, src / name)
    wheels = tmp_path / "wheels"
    _check([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
            "--no-index", "-q", "-w", str(wheels), str(src)], timeout=180)
    [wheel] = list(wheels.glob("specgrid-*.whl"))

    venv = tmp_path / "venv"
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    python = venv / "bin" / "python"
    venv_site = Path(_check([str(python), "-c", "import sysconfig; "
                             "print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (venv_site / "_specgrid_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    _check([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
           env=env, timeout=180)

    work = tmp_path / "elsewhere"
    work.mkdir()
    # the load generator's C scan was compiled into the wheel (a platform wheel)
    where = _check([str(python), "-c", "import grid, actors, engines, workloads, specgrid_metrics; "
                    "from actors.loadgen import _native_scan; import grid.run; "
                    "print('\\n'.join(m.__file__ for m in "
                    "(grid, actors, engines, workloads, specgrid_metrics, _native_scan)));"
                    "print(grid.run.CONF_DIR)"],
                   env=env, cwd=work).stdout.split()
    assert all(Path(f).is_relative_to(venv_site) for f in where), where
    assert Path(where[-1]) == venv_site / "grid" / "conf"  # conf/ mapped into the package

    plan = _check([str(python), "-m", "grid.run", "+sweep=smoke", "plan=true"], env=env,
                  cwd=work, timeout=120)
    assert plan.stdout.count("  cell ") == 4
    assert list(work.iterdir()) == []  # the plan writes nothing

    smoke = _check([str(python), "-m", "grid.run", "+sweep=smoke",
                    "engine.options.time_scale=0.3"], env=env, cwd=work, timeout=240)
    [run_dir] = list((work / "results").iterdir())
    assert f"results: {run_dir}" in smoke.stdout
    cells = load_cells(run_dir)
    assert len(cells) == 4 and (cells.status == "done").all()
    assert (cells.requests_ok == 6).all()
