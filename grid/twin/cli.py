"""`python -m grid.twin RESULTS/RUN_ID [--hardware NAME] [--model NAME] [--start PROFILE]
[--seed N] [--replicates N]`: fit the simulator to a run's committed closed-loop cells and write
`twin.json` into the run folder (docs/twin.md). Bad input (no such run, no done cells, cells at
one load only, a node with no shipped profile) is one `specgrid: error: ...` line, exit 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import engines
from grid.store.files import write_atomic
from grid.twin.cells import measured_cells, recorded_hardware
from grid.twin.table import summary

TWIN_FILE = "twin.json"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m grid.twin", description=(
        "Fit the simulator to a run's measured cells (a twin of its server) and write "
        "twin.json into the run folder. Its numbers are SIMULATION."))
    ap.add_argument("run_dir", type=Path, help="results/RUN_ID")
    ap.add_argument("--hardware", help="the node's hardware profile (default: the run's "
                    "hardware= override, else the simulator's cells' own)")
    ap.add_argument("--model", help="the served model's profile (default: the run's model)")
    ap.add_argument("--start", help="the profile the fit starts from: a name or path, or "
                    "HARDWARE:MODEL (default: the node's own pair)")
    ap.add_argument("--saturated", action="store_true", help="keep cells whose load "
                    "generator could not keep up (left out by default)")
    ap.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    ap.add_argument("--replicates", type=int, default=20, help="bootstrap replicates")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    run_dir: Path = ns.run_dir
    try:
        if not (run_dir / "cells").is_dir():
            raise ValueError(f"{run_dir} is not a run folder with committed cells")
        if ns.replicates < 0:
            raise ValueError(f"--replicates must be >= 0, got {ns.replicates}")
        cells, skipped = measured_cells(run_dir, ns.saturated)
        if not cells:
            why = f" ({len(skipped)} left out, e.g. {skipped[0]})" if skipped else ""
            raise ValueError(f"{run_dir} has no done closed-loop cells to fit a twin to{why}")
        doc = engines.modeller().fit_twin(
            cells, run_id=run_dir.name, hardware=ns.hardware or recorded_hardware(run_dir),
            model=ns.model, start=ns.start, seed=ns.seed, replicates=ns.replicates)
    except (ValueError, OSError) as e:  # OSError: a damaged or unreadable file
        print(f"specgrid: error: {e}", file=sys.stderr)
        return 2
    path = run_dir / TWIN_FILE
    write_atomic(path, json.dumps(doc, indent=1) + "\n", fsync=True)
    print(summary(doc, str(path), skipped))
    return 0
