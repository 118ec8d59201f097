"""`run.json` in a run folder, the run's one record of its settings: the command-line overrides
that define the run's grid, written when execution starts (never by plan=true), so
`python -m grid.run --resume RUN_DIR` composes the same grid again from the folder alone; and
the settings its last report used (`report`: the SLO and the GPU price),
so a plain re-render keeps them.

The folder itself is the run's name and place: `--resume` adds `results_dir=<parent>` and
`run.id=<folder name>` to the recorded overrides, so the printed resume command is right
whatever run.id, run.fresh or results_dir the run was started with. Pure: no Hydra, no Ray."""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from grid.plan.config import ConfigError
from grid.store.files import write_json

RUN_RECORD = "run.json"


def write_run_record(run_dir: Path, overrides: Sequence[str]) -> None:
    """Record the overrides this execution runs with (atomically and durably: the resume
    command of a run that lost power must still find them; grid/store/files.py).
    `history` keeps each distinct command line the folder was run with, oldest first."""
    path = run_dir / RUN_RECORD
    history: list[dict[str, Any]] = []
    if path.is_file():
        try:
            history = list(json.loads(path.read_text()).get("history", []))
        except (ValueError, AttributeError):
            history = []
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if not history or history[-1].get("overrides") != list(overrides):
        history.append({"overrides": list(overrides), "started_at": now})
    record = {**_record(path), "overrides": list(overrides), "started_at": now,
              "specgrid": specgrid_version(), "history": history}
    try:
        write_json(path, record, fsync=True, indent=1)
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from None


def _record(path: Path) -> dict[str, Any]:
    """run.json as a dict ({} when absent or unreadable)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def record_report_settings(run_dir: Path, settings: dict[str, Any]) -> None:
    """The settings the report used (`report` in run.json; the rest of the record kept)."""
    path = run_dir / RUN_RECORD
    write_json(path, {**_record(path), "report": settings}, fsync=False, indent=1)


def report_settings(run_dir: Path) -> dict[str, Any]:
    """The settings the run's last report used ({} before any report)."""
    found = _record(run_dir / RUN_RECORD).get("report")
    return found if isinstance(found, dict) else {}


def read_run_record(run_dir: Path) -> list[str]:
    """The recorded overrides of a run folder; a ConfigError (one line) if it has none."""
    path = run_dir / RUN_RECORD
    if not run_dir.is_dir():
        raise ConfigError(f"--resume {run_dir}: no such folder")
    if not path.is_file():
        raise ConfigError(f"--resume {run_dir}: not a run folder started by grid.run "
                          f"(no {RUN_RECORD})")
    try:
        overrides = json.loads(path.read_text())["overrides"]
    except KeyError:
        raise ConfigError(f"--resume {run_dir}: not a run folder started by grid.run "
                          f"(no overrides in {RUN_RECORD})") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path} is not a run record ({type(e).__name__}: {e})") from None
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"{path}: 'overrides' is not a list of strings")
    return overrides


def resume_command(run_dir: Path) -> str:
    """The command that resumes this run folder (absolute, so right from any directory)."""
    return f"python -m grid.run --resume {shlex.quote(str(Path(run_dir).resolve()))}"


def specgrid_version() -> str:
    try:
        return metadata.version("specgrid")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"
