"""Files the report leaves in a run folder beside report.html (the settings a question
recommends, in the engine's own form): only under the run folder, each replaced atomically by the
store's writer (grid/store/files.py), so a reader sees the old file or the new one, never half.
Not fsynced: like the report, they are made again from the committed cells."""

from __future__ import annotations

from pathlib import Path

from grid.store.files import make_dirs, write_atomic


def write_file(run_dir: Path, relative: str, content: str) -> Path:
    """Write `content` to `run_dir/relative` (folders created); ValueError for a path that
    leaves the run folder. Returns the path."""
    root = Path(run_dir).resolve()
    path = (root / relative).resolve()
    if root not in path.parents:
        raise ValueError(f"{relative} is not inside the run folder {root}")
    make_dirs(path.parent, fsync=False)
    write_atomic(path, content, fsync=False)
    return path
