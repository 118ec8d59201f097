"""`python -m grid.twin RESULTS/RUN_ID [--hardware NAME] [--model NAME|FOLDER]
[--start PROFILE] [--engine NAME] [--variants V1,V2] [--holdout LOADS]
[--holdout-workloads W1,W2] [--seed N] [--replicates N]`: fit the simulator to a run's
committed closed-loop cells and write `twin.json` into the run folder (docs/twin.md). Bad input
(no such run, no done cells, cells at one load only, a node with no shipped profile and no
config.json, a held-out load or workload not measured) is one `specgrid: error: ...` line,
exit 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import engines
from engines.twin_data import MeasuredCell
from grid.store.files import write_atomic
from grid.twin.cells import measured_cells, recorded_hardware
from grid.twin.table import summary

TWIN_FILE = "twin.json"


def loads(text: str) -> tuple[int, ...]:
    """``2,8`` -> (2, 8): the loads (concurrency) --holdout names."""
    try:
        out = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of loads: {text!r} (e.g. 2,8)") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"not a list of loads >= 1: {text!r} (e.g. 2,8)")
    return out


def names(text: str) -> tuple[str, ...]:
    """``a,b`` -> ("a", "b"): the variants or workloads an option names."""
    out = tuple(v.strip() for v in text.split(",") if v.strip())
    if not out:
        raise argparse.ArgumentTypeError(f"not a list of names: {text!r}")
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m grid.twin", description=(
        "Fit the simulator to a run's measured cells (a twin of its server) and write "
        "twin.json into the run folder. Its numbers are SIMULATION."))
    ap.add_argument("run_dir", type=Path, help="results/RUN_ID")
    ap.add_argument("--hardware", help="the node's hardware profile (default: the run's "
                    "hardware= override, else the simulator's cells' own)")
    ap.add_argument("--model", help="the served model's profile, or its folder (its "
                    "config.json gives the shapes; default: the run's model if a profile "
                    "describes it, else the folder its servers were started with)")
    ap.add_argument("--start", help="the profile the fit starts from: a name or path, or "
                    "HARDWARE:MODEL (default: the node's own pair)")
    ap.add_argument("--saturated", action="store_true", help="keep cells whose load "
                    "generator could not keep up (left out by default)")
    ap.add_argument("--engine", help="fit only this engine's cells (a run of several)")
    ap.add_argument("--variants", type=names, default=(), metavar="V1,V2",
                    help="fit only these variants' cells (a twin has one drafter)")
    ap.add_argument("--holdout", type=loads, default=(), metavar="C1,C2",
                    help="loads to hold out: the twin is also fitted on the other loads' "
                    "cells and judged on these (besides leaving each load out in turn)")
    ap.add_argument("--holdout-workloads", type=names, default=(), metavar="W1,W2",
                    help="workloads to hold out (e.g. one output length's: "
                    "agentic__max_new_tokens-32): fitted on the others, judged on these")
    ap.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    ap.add_argument("--replicates", type=int, default=20, help="bootstrap replicates")
    return ap


def chosen(cells: list[MeasuredCell], skipped: list[str], engine: str | None,
           variants: Sequence[str]) -> tuple[list[MeasuredCell], list[str]]:
    """The cells --engine and --variants keep; ValueError naming what the run has when one
    names nothing in it."""
    if engine is not None and engine not in {c.engine for c in cells}:
        raise ValueError(f"--engine {engine}: no cells of it (the run's: "
                         f"{', '.join(sorted({c.engine for c in cells}))})")
    unknown = sorted(set(variants) - {c.variant for c in cells})
    if unknown:
        raise ValueError(f"--variants: no cells of {', '.join(unknown)} (the run's: "
                         f"{', '.join(sorted({c.variant for c in cells}))})")
    keep, out = [], list(skipped)
    for c in cells:
        if (engine is None or c.engine == engine) and (not variants or c.variant in variants):
            keep.append(c)
        else:
            out.append(f"{c.cell_id} {c.variant} {c.workload}: not chosen (--engine, "
                       "--variants)")
    return keep, out


def main(argv: Sequence[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    run_dir: Path = ns.run_dir
    try:
        if not (run_dir / "cells").is_dir():
            raise ValueError(f"{run_dir} is not a run folder with committed cells")
        if ns.replicates < 0:
            raise ValueError(f"--replicates must be >= 0, got {ns.replicates}")
        cells, skipped = measured_cells(run_dir, ns.saturated)
        cells, skipped = chosen(cells, skipped, ns.engine, ns.variants)
        if not cells:
            why = f" ({len(skipped)} left out, e.g. {skipped[0]})" if skipped else ""
            raise ValueError(f"{run_dir} has no done closed-loop cells to fit a twin to{why}")
        doc = engines.twin_modeller().fit_twin(
            cells, run_id=run_dir.name, hardware=ns.hardware or recorded_hardware(run_dir),
            model=ns.model, start=ns.start, seed=ns.seed, replicates=ns.replicates,
            holdout=ns.holdout, holdout_workloads=ns.holdout_workloads)
    except (ValueError, OSError) as e:  # OSError: a damaged or unreadable file
        print(f"specgrid: error: {e}", file=sys.stderr)
        return 2
    path = run_dir / TWIN_FILE
    write_atomic(path, json.dumps(doc, indent=1) + "\n", fsync=True)
    print(summary(doc, str(path), skipped))
    return 0
