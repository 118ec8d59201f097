"""Forced-acceptance cells (the cells column `forced_acceptance`, engines/forced.py): which cells
they are, and whether the engine honoured each one (its decode accept length within `TOLERANCE`
of the forced mean length). What they are left out of: docs/report.md; the speculation
question's surface is where they speak (`unforced` keeps them out of the rest).

The tolerance covers what moves an honoured engine's figure: the floor-or-ceil draws
(SGLang's `match-expected` draws one length per step for the whole batch; 0.5 / sqrt(steps) at
most) and each request's last step, cut short by its output length (with 64 output tokens and
a length of 3, about one token in 21 steps: -5 %)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from engines.forced import FORCED_LABEL
from grid.analysis.cellstats import CellStats

COLUMN = "forced_acceptance"
TOLERANCE = 0.10
"""Relative difference between measured and forced accept length an honoured cell stays
within."""
HONOURED_COLUMNS = ["cell_id", "variant", "workload", "concurrency", "forced_length",
                    "measured_length", "difference", "honoured", "statement"]

__all__ = ["COLUMN", "FORCED_LABEL", "HONOURED_COLUMNS", "TOLERANCE", "forced_length",
           "forced_mask", "honoured", "read_forced", "unforced"]


def read_forced(value: Any) -> dict[str, Any] | None:
    """One cell's column value as written (engines/forced.py `forced_record`: the length or
    rates and the mean length); None: not forced."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        record = json.loads(str(value))
        float(record["mean_length"])
    except (ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def forced_length(value: Any) -> float | None:
    """The forced mean length of one cell's column value (None: not forced)."""
    record = read_forced(value)
    return None if record is None else float(record["mean_length"])


def forced_mask(cells: pd.DataFrame) -> pd.Series:
    """True for the forced cells (a run without the column has none)."""
    if COLUMN not in cells:
        return pd.Series(False, index=cells.index)
    return cells[COLUMN].map(lambda v: forced_length(v) is not None).astype(bool)


def unforced(stats: CellStats, cells: pd.DataFrame) -> CellStats:
    """The analysed cells without the forced ones (what a recommendation may rest on)."""
    ids = set(cells.cell_id[forced_mask(cells)])
    if not ids:
        return stats
    table = stats.table[~stats.table.cell_id.isin(ids)].reset_index(drop=True)
    return CellStats(table, stats.replicates, stats.slo, stats.n_replicates)


def honoured(cells: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """One row per done forced cell: the forced and measured lengths, their relative
    difference, whether it is within `tolerance`, and one line saying so (a cell whose engine
    reported no verify steps is not honoured: nothing shows the forcing took effect)."""
    rows = []
    done = cells[forced_mask(cells) & (cells.status == "done")] if len(cells) else cells
    for _, cell in done.iterrows():
        forced = forced_length(cell[COLUMN])
        assert forced is not None
        # The decode length only: `accept_length` counts the token prefill makes, which no
        # verify step produced (about 7 % high at 16 output tokens), so it is no stand-in.
        measured = cell.get("accept_length_decode")
        if measured is None or pd.isna(measured):
            diff, ok = math.nan, False
            text = (f"forced {forced:g}, no decode accept length measured (no verify steps "
                    "counted): not shown to be honoured")
        else:
            diff = float(measured) / forced - 1.0
            ok = abs(diff) <= tolerance
            text = (f"forced {forced:g}, measured {float(measured):.2f} ({diff:+.1%}"
                    + (f", within ±{tolerance:.0%})" if ok else
                       f": FLAGGED, beyond ±{tolerance:.0%})"))
        rows.append({"cell_id": str(cell.cell_id), "variant": str(cell.variant),
                     "workload": str(cell.workload), "concurrency": cell.get("concurrency"),
                     "forced_length": forced,
                     "measured_length": None if pd.isna(measured) else float(measured),
                     "difference": diff, "honoured": ok, "statement": text})
    return pd.DataFrame(rows, columns=HONOURED_COLUMNS)
