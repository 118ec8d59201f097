"""A run folder read through the loader and analysed into a RunData (grid/report/rundata.py):
the cells with windowed metrics and intervals, the decision, server metrics per cell (gauges
and counter deltas by role: grid/report/serverdata.py), telemetry, energy, validity findings
(grid/report/validity.py) and provenance."""

from __future__ import annotations

import math
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grid.analysis import Slo, analyse_cells, decide
from grid.analysis.cellstats import REQUEST_COLUMNS, CellStats
from grid.analysis.decision import Decision
from grid.analysis.domains import REQUEST_COLUMNS as DISTRIBUTION_COLUMNS
from grid.analysis.forced import forced_mask, unforced
from grid.analysis.lesson import acceptance_table
from grid.analysis.setups import label_setups
from grid.cli.runrecord import report_settings
from grid.questions import load_trace, traced
from grid.report import assumed, lossless
from grid.report.operator import operator_view
from grid.report.rundata import RunData
from grid.report.serverdata import cell_families, server_deltas, server_gauges
from grid.report.validity import ALIGNMENT, validity
from grid.store import integrity
from grid.store.loader import (
    DamagedFileError,
    load_cells,
    load_requests,
    load_server_metrics,
    load_telemetry,
    load_turns,
    set_aside_attempts,
)
from grid.store.schema import REQUEST_FIELDS, TURN_FIELDS

DECISION_FILE = "decision.json"
_REQUEST_EXTRA = ["variant", "workload", "concurrency", "domain"]
TURN_COLUMNS = [name for name in TURN_FIELDS.names if name != "itl_s"] + ["variant", "workload"]
"""The turn columns the report reads (not the per-token gaps: the cell row has ITL
percentiles)."""
SENT_ROUNDS = ("ok", "error")
"""Rounds that reached the server (skipped / not_run ones never did): a conversation cell's
requests."""


def saved_slo(run_dir: Path) -> Slo | None:
    """The SLO the run's last report used (run.json `report`), so a re-render keeps it."""
    try:
        saved = report_settings(run_dir)["slo"]
        return Slo(**{k: saved.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms")})
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def saved_price(run_dir: Path) -> float | None:
    """The price per GPU-hour the run's last report used (run.json `report`)."""
    price = report_settings(run_dir).get("gpu_hour_usd")
    return float(price) if isinstance(price, int | float) and price > 0 else None


def used_settings(data: RunData) -> dict[str, Any]:
    """What run.json `report` records of this report's settings (the two above)."""
    return {"slo": data.slo.as_dict(), "gpu_hour_usd": data.gpu_hour_usd}


def load_run(run_dir: Path, slo: Slo | None = None, baseline: str = "baseline",
             replicates: int = 1000, seed: int = 0,
             gpu_hour_usd: float | None = None) -> RunData:
    """The run folder loaded and analysed; `slo` and `gpu_hour_usd` default to those its last
    report used."""
    run_dir = Path(run_dir)
    slo = slo or saved_slo(run_dir) or Slo()
    gpu_hour_usd = gpu_hour_usd if gpu_hour_usd is not None else saved_price(run_dir)
    unreadable: list[DamagedFileError] = []  # each loader leaves damaged files out, listed here
    cells = load_cells(run_dir, damaged=unreadable)
    extra = [c for c in (ALIGNMENT,) if c in REQUEST_FIELDS.names]
    wanted = REQUEST_COLUMNS + _REQUEST_EXTRA + extra + DISTRIBUTION_COLUMNS
    requests = load_requests(run_dir, columns=list(dict.fromkeys(wanted + ["engine"])),
                             damaged=unreadable)
    turns = load_turns(run_dir, columns=TURN_COLUMNS, damaged=unreadable)
    metrics = load_server_metrics(run_dir, damaged=unreadable)
    telemetry = load_telemetry(run_dir, damaged=unreadable)
    # Bit rot that keeps a file readable (a flipped byte in a column the report does not read,
    # or one the page checksums miss): every committed file hashed against its cell row's
    # manifest (grid/store/integrity.py, ~1 GB/s), so a damaged cell never reaches a figure.
    unread = {u.path for u in unreadable}
    mismatched = [d for d in integrity.check(run_dir, deep=True) if d.path not in unread]
    # A cell with any damaged file is left out whole: its other files alone would mislead.
    damaged_ids = {d.cell_id for d in unreadable} | {d.cell_id for d in mismatched}
    if damaged_ids:
        cells, requests, turns, metrics, telemetry = (
            f[~f.cell_id.isin(damaged_ids)].reset_index(drop=True)
            for f in (cells, requests, turns, metrics, telemetry))
    # One grid, several engines, models or hardware: each variant is labelled with its setup
    # (`vllm · eagle3`) and compared only with its own setup's baseline
    # (grid/analysis/setups.py).
    _, cells, (requests, turns) = label_setups(cells, requests, turns)
    stats = analyse_cells(cells, with_rounds(requests, turns), slo, replicates, seed)
    trace = load_trace(run_dir)
    # Each cell's /metrics read with its engine's names (grid/report/serverdata.py).
    families = cell_families(cells, metrics)
    variants = dict(zip(cells.cell_id.astype(str), cells.variant.astype(str), strict=True))
    data = RunData(run_dir, cells, requests, turns, stats,
                   run_decision(unforced(stats, cells), baseline, trace),
                   metrics, server_deltas(metrics, families), telemetry,
                   energy_per_token(telemetry, cells, stats.table), slo, baseline=baseline,
                   damaged=damage_lines(run_dir, unreadable, mismatched),
                   gpu_hour_usd=gpu_hour_usd, search=trace,
                   server_gauges=server_gauges(metrics, families, variants))
    data.operator = operator_view(unforced(stats, cells), cells, data.energy, gpu_hour_usd)
    table = acceptance_table(requests, cells[~forced_mask(cells)], replicates=replicates,
                             seed=seed)  # the drafter judged on its own acceptance only
    data.acceptance = table[table.alignment.notna()]
    data.lossless = lossless.load_table(run_dir, cells, baseline)  # greedy outputs vs baseline
    data.validity = validity(data)
    assumed.apply(data)  # a simulated run: where its curve is measured, where assumed
    return data


def run_decision(stats: CellStats, baseline: str, trace: dict | None) -> Decision:
    """The decision over the cells, its recommendations as the run's question changes them (the
    speculation question's own in place of the crossover rule's)."""
    decision = decide(stats, baseline)
    if trace:
        decision.recommendations = traced(trace).recommendations(decision.recommendations, trace)
    return decision


def damage_lines(run_dir: Path, unreadable: list[DamagedFileError],
                 mismatched: Sequence[integrity.Damage] = ()) -> list[str]:
    """One line per damaged file: those the loaders could not read, those whose bytes differ
    from their manifest, then the attempts set aside as damaged (grid/store/results.py) that
    no later committed attempt replaced."""
    lines = [f"{d.shown} (cell {d.cell_id}, attempt {d.attempt}): {d.reason}"
             for d in unreadable]
    lines += [d.line(run_dir).removeprefix("damaged: ") for d in mismatched]
    for path, cell_id, attempt in set_aside_attempts(run_dir):
        lines.append(f"{path.relative_to(run_dir)} (cell {cell_id}, attempt {attempt}): set "
                     "aside as damaged, not measured again yet")
    return lines


def with_rounds(requests: pd.DataFrame, turns: pd.DataFrame) -> pd.DataFrame:
    """The requests the cell analysis reads: the prompt cells' requests and, for conversation
    cells, their sent rounds (a round is one request: sent, timed, streamed like any other;
    specgrid_metrics/requests.py's definitions apply unchanged)."""
    rounds = turns[turns.status.isin(SENT_ROUNDS)]
    if rounds.empty:
        return requests
    rounds = rounds[[c for c in REQUEST_COLUMNS if c in rounds]]
    return rounds if requests.empty else pd.concat([requests, rounds], ignore_index=True)


def energy_per_token(telemetry: pd.DataFrame, cells: pd.DataFrame, table: pd.DataFrame
                     ) -> pd.DataFrame:
    """Per cell: energy of the server's GPUs (trapezoid over the power samples; the GPUs in
    the cell's CUDA_VISIBLE_DEVICES when recorded, else every sampled GPU) and joules per
    output token of the cell's completed requests."""
    power = telemetry[telemetry.metric == "power_w"] if len(telemetry) else telemetry
    if power.empty:
        return pd.DataFrame(columns=["cell_id", "energy_j", "j_per_token"])
    visible = dict(zip(cells.cell_id, cells.cuda_visible_devices, strict=True))
    tokens = dict(zip(table.cell_id, table.get("measured_tokens", pd.Series(dtype=float)),
                      strict=False))
    rows = []
    for cell_id, group in power.groupby("cell_id", sort=False):
        devices = visible.get(cell_id)
        if isinstance(devices, str) and devices:
            ids = {int(x) for x in devices.split(",") if x.strip().isdigit()}
            group = group[group.gpu.isin(ids)] if ids else group
        energy = 0.0
        for _, gpu in group.groupby(["node", "gpu"]):
            gpu = gpu.sort_values("sampled_at")
            energy += float(np.trapezoid(gpu.value, gpu.sampled_at)) if len(gpu) > 1 else 0.0
        n = tokens.get(cell_id)
        rows.append({"cell_id": cell_id, "energy_j": energy,
                     "j_per_token": energy / n if n else math.nan})
    return pd.DataFrame(rows)


def provenance(data: RunData) -> dict:
    """Versions, server command lines and environments per variant, hardware."""
    cells = data.cells
    servers = []
    if len(cells):
        for _, group in cells.groupby("server_key", sort=False):
            row = group.iloc[0]
            servers.append({"variant": str(row.variant), "engine": row.engine,
                            "engine_version": row.engine_version, "model": row.model,
                            "command": row.server_command, "env": row.server_env,
                            "cuda_visible_devices": row.cuda_visible_devices})
    versions = {}
    for package in ("specgrid", "ray", "pandas", "pyarrow", "numpy", "matplotlib", "duckdb",
                    "prometheus-client", "nvidia-ml-py"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    tel = data.telemetry
    gpus = tel[tel.gpu >= 0][["node", "gpu"]].drop_duplicates() if len(tel) else tel
    hardware = (f"{len(gpus)} GPU(s) sampled on {gpus.node.nunique()} node(s)" if len(gpus)
                else "GPUs not sampled (NVML unavailable)")
    return {"run": data.run_dir.name, "servers": servers, "versions": versions,
            "report_host": f"{platform.node()} ({platform.platform()}, Python "
                           f"{platform.python_version()})",
            "hardware": hardware}
