"""What a question reads of the committed cells: output tok/s with the report's replicates."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from grid.analysis import Slo
from grid.analysis.cellstats import REQUEST_COLUMNS, CellStats, analyse_cells
from grid.analysis.surface import Throughput
from grid.plan.cells import Cell
from grid.store.loader import load_cells, load_requests

K = TypeVar("K")


def done_analysed(run_dir: Path, ids: Iterable[str] | None, slo: Slo,
                  replicates: int | None = None) -> tuple[pd.DataFrame, CellStats] | None:
    """The cells among `ids` (every cell when None) committed as done, their rows and their
    analysis as the report makes it (None: none); `replicates` fewer where only the point
    estimates are read."""
    table = load_cells(run_dir) if (run_dir / "cells").is_dir() else None
    if table is None or table.empty:
        return None
    keep = table.status == "done"
    if ids is not None:
        keep &= table.cell_id.isin(set(ids))
    table = table[keep].reset_index(drop=True)
    if table.empty:
        return None
    requests = load_requests(run_dir, columns=REQUEST_COLUMNS,
                             filters=[("cell_id", "in", sorted(table.cell_id))])
    extra = {} if replicates is None else {"replicates": replicates}
    return table, analyse_cells(table, requests, slo, **extra)


def analysed(run_dir: Path, cells: Iterable[Cell], slo: Slo, replicates: int | None = None
             ) -> CellStats | None:
    """The cells committed as done, analysed as the report does (None: none)."""
    found = done_analysed(run_dir, [c.cell_id for c in cells], slo, replicates)
    return None if found is None else found[1]


def cell_throughputs(run_dir: Path, cells: Iterable[Cell], slo: Slo) -> dict[str, Throughput]:
    """Each done cell's output tok/s with its replicates, by cell id."""
    stats = analysed(run_dir, cells, slo)
    if stats is None:
        return {}
    out = {}
    for cell_id, value in zip(stats.table.cell_id.astype(str),
                              stats.table.output_tok_s.astype(float), strict=True):
        if math.isfinite(value):
            out[cell_id] = Throughput(value, np.asarray(stats.replicates[cell_id]["output_tok_s"]))
    return out


def point_throughputs(run_dir: Path, points: Mapping[K, Cell], slo: Slo) -> dict[K, Throughput]:
    """The points whose cell is committed as done with a throughput (`cell_throughputs`)."""
    value = cell_throughputs(run_dir, points.values(), slo)
    return {p: value[c.cell_id] for p, c in points.items() if c.cell_id in value}
