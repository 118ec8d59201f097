"""What the surface reads from a run's cells (cost.py `forced_points`): each point's
configuration and decode accept length with its replicates, which forced cells the engine
honoured (grid/analysis/forced.py), and the depth a configuration was served at."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engines.forced import speculative_steps
from grid.analysis.cellstats import DECODE_FACTOR, CellStats
from grid.analysis.forced import forced_mask, honoured
from grid.analysis.points import Point

FORCED_PART = re.compile(r"__forced_(?:len|rates)-[0-9.]+(?:_[0-9.]+)*")
"""The part grid/plan/cells.py adds to a variant label for a forced-acceptance axis."""
DRAFT_PART = re.compile(r"__draft-.+?(?=__|$)")
"""... and for an axis over the draft model (`__draft-noise-0.20`)."""
Length = tuple[float, np.ndarray]
"""A point's measured decode accept length and its replicates (paired with the throughput's)."""


def configuration(variant: str) -> str:
    """The speculative configuration of a variant label (its forced and draft parts removed)."""
    return DRAFT_PART.sub("", FORCED_PART.sub("", variant))


def server_args(value: Any) -> dict[str, Any]:
    """A cells row's `server_args` (the variant's args as JSON); {} when not recorded."""
    try:
        args = json.loads(str(value)) if isinstance(value, str) else None
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def depth_of(cells: pd.DataFrame) -> int | None:
    """The speculative depth (engines/forced.py `speculative_steps`) the cells' `server_args`
    record; None when none is recorded or they differ."""
    if "server_args" not in cells or cells.empty:
        return None
    found = {speculative_steps(server_args(v)) for v in cells.server_args if isinstance(v, str)}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


@dataclass
class CurveCells:
    """A run's cells as the surface reads them."""

    stats: CellStats
    measured: dict[str, float]
    """Cell id -> its decode accept length (`accept_length_decode`), where measured."""
    statements: dict[str, str]
    """Forced cell id -> why it is not honoured (absent: honoured or not forced)."""
    forced: set[str]
    cells: pd.DataFrame

    @classmethod
    def of(cls, stats: CellStats, cells: pd.DataFrame) -> CurveCells:
        measured = ({str(c): float(v) for c, v in zip(cells.cell_id, cells.accept_length_decode,
                                                      strict=True) if pd.notna(v)}
                    if "accept_length_decode" in cells else {})
        statements = {str(r.cell_id): f"{r.variant} c={r.concurrency}: {r.statement}"
                      for r in honoured(cells).itertuples() if not r.honoured}
        forced = set(cells.cell_id.astype(str)[forced_mask(cells)])
        return cls(stats, measured, statements, forced, cells)

    def is_forced(self, p: Point) -> bool:
        return p.cell_ids[0] in self.forced

    def not_honoured(self, p: Point) -> list[str]:
        """The statements of the point's forced cells the engine did not honour (a cell
        without a decode length among them: `honoured`)."""
        return [self.statements[c] for c in p.cell_ids if c in self.statements]

    def length(self, p: Point) -> Length | None:
        """The point's decode accept length (mean over its repeats' cells) and its replicates
        (the mean over its cells of each cell's length times its `DECODE_FACTOR` replicate,
        drawn with the same requests as the cell's throughput replicate, grid/analysis/
        cellstats.py `decode_replicates`; a cell without them counts its length in every
        replicate); None where a cell has no length measured."""
        if not p.cell_ids or any(c not in self.measured for c in p.cell_ids):
            return None
        n = len(p.replicates["output_tok_s"])
        reps = [self.stats.replicates.get(c, {}).get(DECODE_FACTOR) for c in p.cell_ids]
        per_cell = [self.measured[c] * (r if r is not None and len(r) == n else np.ones(n))
                    for c, r in zip(p.cell_ids, reps, strict=True)]
        return float(np.mean([self.measured[c] for c in p.cell_ids])), np.mean(per_cell, axis=0)

    def depth(self, ids: Sequence[str]) -> int | None:
        return depth_of(self.cells[self.cells.cell_id.astype(str).isin(set(ids))])
