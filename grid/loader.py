"""The public face of specgrid's results: read a run folder's committed attempts with the
explicit schema (grid/store/loader.py does the reading). Notebooks, the report and users import
from here; everything else under grid/store/ is private to the driver.

`pareto(run)` and `capacity(run, slo)` give the report's operator's view of a run as frames
(grid/analysis/pareto.py and capacity.py say how each figure is made): `run` is a run folder or
what `grid.report.load_run` returned."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from grid.analysis.capacity import ATTAINMENT
from grid.analysis.goodput import Slo
from grid.store.loader import (
    dataset_files,
    load_cells,
    load_requests,
    load_server_metrics,
    load_telemetry,
    load_turns,
    sql,
)

if TYPE_CHECKING:
    from grid.report.operator import OperatorView
    from grid.report.rundata import RunData

__all__ = ["capacity", "dataset_files", "load_cells", "load_requests", "load_server_metrics",
           "load_telemetry", "load_turns", "pareto", "sql"]


def _view(run: str | Path | RunData, slo: Slo | None, target: float,
          gpu_hour_usd: float | None) -> OperatorView:
    # Imported here: reading results must not pay for the report's plotting stack.
    from grid.report.data import load_run
    from grid.report.operator import operator_view
    from grid.report.rundata import RunData

    if isinstance(run, RunData):
        if slo is not None and slo != run.slo:
            raise ValueError(f"the run was analysed with the SLO {run.slo.describe()}, not "
                             f"{slo.describe()}: pass the run folder to analyse it again")
        data = run
    else:
        data = load_run(Path(run), slo, gpu_hour_usd=gpu_hour_usd)
    price = gpu_hour_usd if gpu_hour_usd is not None else data.gpu_hour_usd
    return operator_view(data.stats, data.cells, data.energy, price, target)


def pareto(run: str | Path | RunData, gpu_hour_usd: float | None = None) -> pd.DataFrame:
    """One row per closed-loop (variant, workload, concurrency) point of the run, repeats
    averaged: `output_tok_s`, `tok_s_per_user` (/ concurrency) and `tok_s_per_gpu` (/ the GPUs
    that served it), each with `_lo` / `_hi` (95 % bootstrap interval), `gpus`, `frontier`
    (on the workload's Pareto frontier over every variant), `variant_frontier` (over the
    variant's own loads), `usd_per_mtok` with its interval (with a price per GPU-hour:
    `gpu_hour_usd`, else the one the run's report used) and `j_per_token` (where NVML power was
    read)."""
    return _view(run, None, ATTAINMENT, gpu_hour_usd).frontier


def capacity(run: str | Path | RunData, slo: Slo | None = None, target: float = ATTAINMENT,
             gpu_hour_usd: float | None = None) -> pd.DataFrame:
    """One row per (variant, workload, load kind): `capacity`, the highest tested load, from
    the lowest up, at which at least `target` of the requests meet the goodput SLOs (`slo`,
    default: the one the run's report used; -inf: not even the lowest load), its interval
    (`lo`, `hi`), `bracketed` (False: every tested load met them), the goodput there with its
    interval, `gpus`, `goodput_tok_s_per_gpu`, `usd_per_mtok` / `usd_per_good_mtok` (with a
    price) and `j_per_token`; `serves_most` marks the variant of each workload and load kind
    whose capacity point serves the most (per GPU where known), `serves_most_verdict` says
    whether its margin's interval excludes zero."""
    view = _view(run, slo, target, gpu_hour_usd)
    rows = []
    for c in view.capacities:
        row = c.as_json()
        row.pop("statement")
        row["lo"], row["hi"] = c.lo, c.hi
        row.pop("interval")
        row["goodput_tok_s_lo"], row["goodput_tok_s_hi"] = c.goodput_tok_s_lo, c.goodput_tok_s_hi
        row.pop("goodput_tok_s_interval")
        win = next((b for b in view.best if (b["workload"], b["load_kind"], b["winner"])
                    == (c.workload, c.load_kind, c.variant)), None)
        row["serves_most"] = win is not None
        row["serves_most_verdict"] = win["verdict"] if win else None
        rows.append(row)
    return pd.DataFrame(rows)
