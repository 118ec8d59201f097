"""Files the report leaves in a run folder beside report.html (the settings a depth search
found, in the engine's own form): written only under the run folder, each atomically (a
temporary name, then a rename), so a reader sees the old file or the new one, never half."""

from __future__ import annotations

import os
from pathlib import Path


def write_file(run_dir: Path, relative: str, content: str) -> Path:
    """Write `content` to `run_dir/relative` (folders created); ValueError for a path that
    leaves the run folder. Returns the path."""
    root = Path(run_dir).resolve()
    path = (root / relative).resolve()
    if root not in path.parents:
        raise ValueError(f"{relative} is not inside the run folder {root}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content)
    os.replace(tmp, path)
    return path
