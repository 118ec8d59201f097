"""`python -m grid.twin RESULTS/RUN_ID [options]` (`--help` lists them): a twin of the server
a run measured, the simulator fitted to the run's committed closed-loop cells, written as
`twin.json` into the run folder. This module only reads the run folder into plain
`MeasuredCell`s (engines/twin_data.py) and writes the file; the model, the fit and the printout
are asked of `engines.twin_modeller()` (docs/twin.md, "Where the code is"). Bad input is one
`specgrid: error: ...` line, exit 2."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import engines
from engines.forced import ForcedAcceptance
from engines.twin_data import MeasuredCell
from grid.analysis.cellstats import repeat_of
from grid.analysis.forced import forced_length, read_forced
from grid.cli.runrecord import RUN_RECORD, read_run_record
from grid.loader import load_cells, load_requests, load_turns
from grid.plan.config import ConfigError
from grid.store.files import write_atomic

REQUEST_COLUMNS = ["cell_id", "status", "input_tokens", "output_tokens", "domain"]


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _positions(value: Any) -> tuple[float, ...] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    out = tuple(float(v) for v in value)
    return out or None


def known_acceptance(row: dict[str, Any]) -> tuple[float, ...] | None:
    """A speculative cell's acceptance per draft position as known: the engine's own counts
    where it made them, else a forced cell's forced rates (a length by the minimum-variance
    schedule, engines/forced.py); None where neither is there."""
    counted = _positions(row.get("acceptance_per_position"))
    if counted:
        return counted
    given = read_forced(row.get("forced_acceptance"))
    if given is None:
        return None
    if given.get("rates") is not None:
        return tuple(float(r) for r in given["rates"])
    length = float(given["length"])
    return ForcedAcceptance(steps=max(1, math.ceil(length - 1)), length=length).per_position()


def measured_cells(run_dir: Path, saturated: bool = False, known: bool = False
                   ) -> tuple[list[MeasuredCell], list[str]]:
    """(the done closed-loop cells, one line per cell left out and why). A cell whose load
    generator could not keep up (`client_saturated`) measured the client, not the server: left
    out unless ``saturated``. ``known``: each speculative cell's acceptance is taken as known
    (`known_acceptance`), so forced cells count too and a speculative cell without
    per-position counts or a forced value is left out."""
    cells = load_cells(run_dir)
    if not len(cells):
        return [], []
    done = cells[cells.status == "done"]
    skipped = []
    conversations = set(load_turns(run_dir, columns=["cell_id"]).cell_id)
    requests = load_requests(run_dir, columns=REQUEST_COLUMNS)
    requests = requests[requests.status == "ok"]
    by_cell = {cid: g for cid, g in requests.groupby("cell_id")}
    out = []
    for rec in done.to_dict("records"):
        row: dict[str, Any] = {str(k): v for k, v in rec.items()}
        cid = str(row["cell_id"])
        why = None
        if _num(row["rate"]) is not None or _num(row["concurrency"]) is None:
            why = "open loop (a twin fits closed-loop cells)"
        elif cid in conversations:
            why = "conversation replay"
        elif cid not in by_cell:
            why = "no ok requests"
        elif forced_length(row.get("forced_acceptance")) is not None and not known:
            why = ("forced acceptance: performance only (a twin fits the drafter's own "
                   "acceptance; --known-acceptance fits the system alone)")
        elif known and _num(row.get("accept_length_decode")) is not None \
                and known_acceptance(row) is None:
            why = "acceptance not counted per draft position (--known-acceptance needs it)"
        elif "--speculative-adaptive" in str(row["server_command"] or ""):
            why = ("speculation switched by batch size (speculative_disable_above_batch): "
                   "not modelled by the twin")
        elif bool(row["client_saturated"]) and not saturated:
            why = ("client saturated: its numbers measure the load generator "
                   f"({row['saturation_reason']}; --saturated keeps it)")
        if why:
            skipped.append(f"{cid} {row['variant']} {row['workload']}: {why}")
            continue
        out.append(_measured(row, by_cell[cid], known))
    return out, skipped


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) \
        else str(value)


def _measured(row: dict[str, Any], reqs: pd.DataFrame, known: bool = False) -> MeasuredCell:
    prompt = reqs.input_tokens.dropna()
    output = reqs.output_tokens.dropna()
    domains = reqs.domain.dropna().astype(str)
    shares = {str(k): float(v) for k, v in domains.value_counts(normalize=True).items()}
    return MeasuredCell(
        cell_id=str(row["cell_id"]), variant=str(row["variant"]),
        workload=str(row["workload"]), engine=str(row["engine"]),
        engine_version=_text(row["engine_version"]), model=str(row["model"]),
        concurrency=int(_num(row["concurrency"]) or 1),
        num_requests=int(_num(row["requests_ok"]) or len(reqs)),
        temperature=_num(row["temperature"]) or 0.0,
        server_command=_text(row["server_command"]) or "",
        server_info=_text(row["server_info"]),
        output_tok_s=_num(row["output_tok_s"]), ttft_p50_s=_num(row["ttft_p50_s"]),
        tpot_p50_s=_num(row["tpot_p50_s"]), accept_length=_num(row["accept_length"]),
        accept_length_decode=_num(row["accept_length_decode"]),
        acceptance_per_position=_positions(row["acceptance_per_position"]),
        prompt_tokens=(float(prompt.mean()), int(prompt.min()), int(prompt.max()))
        if len(prompt) else (1.0, 1, 1),
        output_tokens=(float(output.mean()), int(output.min()), int(output.max()))
        if len(output) else (1.0, 1, 1),
        domains=shares,
        known_acceptance=known_acceptance(row) if known else None,
        repeat=repeat_of(pd.Series(row)))


def recorded_hardware(run_dir: Path) -> str | None:
    """The node's hardware profile as the run recorded it: its `hardware=NAME` override
    (run.json), else `cpu` when every cell ran on the CPU (the cells' `device`), else None."""
    if (run_dir / RUN_RECORD).is_file():
        try:
            overrides = read_run_record(run_dir)
        except ConfigError:
            overrides = []
        for o in overrides:
            key, sep, value = o.lstrip("+").partition("=")
            if sep and key in ("hardware", "hardware.name") and "," not in value:
                return value
    cells = load_cells(run_dir)
    devices = set(cells.device.dropna().astype(str)) if "device" in cells else set()
    return "cpu" if devices == {"cpu"} else None


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
    ap.add_argument("--known-acceptance", action="store_true", help="take each speculative "
                    "cell's acceptance as known (the engine's per-position counts, or a forced "
                    "cell's forced rates) and fit the system's step costs alone: drafters of "
                    "one shape but any quality, forced cells included")
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
        cells, skipped = measured_cells(run_dir, ns.saturated, ns.known_acceptance)
        cells, skipped = chosen(cells, skipped, ns.engine, ns.variants)
        if not cells:
            why = f" ({len(skipped)} left out, e.g. {skipped[0]})" if skipped else ""
            raise ValueError(f"{run_dir} has no done closed-loop cells to fit a twin to{why}")
        modeller = engines.twin_modeller()
        doc = modeller.fit_twin(
            cells, run_id=run_dir.name, hardware=ns.hardware or recorded_hardware(run_dir),
            model=ns.model, start=ns.start, seed=ns.seed, replicates=ns.replicates,
            holdout=ns.holdout, holdout_workloads=ns.holdout_workloads)
    except (ValueError, OSError) as e:  # OSError: a damaged or unreadable file
        print(f"specgrid: error: {e}", file=sys.stderr)
        return 2
    path = run_dir / TWIN_FILE
    write_atomic(path, json.dumps(doc, indent=1) + "\n", fsync=True)
    print(modeller.twin_summary(doc, str(path), skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
