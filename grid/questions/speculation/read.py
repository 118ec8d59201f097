"""What the surface search reads of a run folder (its own, or an earlier one's:
`grid.search.surface`): the forced cells' step costs c(B, k) by forced rate, with the
baselines' throughputs, through the report's analysis (grid/analysis/surface/cost.py
`forced_points`: each honoured cell at its measured decode length, the replicates paired); and
the drafter's own acceptance profile from its unforced cells (grid/analysis/surface/profile.py:
per request from the acceptance histograms, else per cell from vLLM's per-position counter)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from engines.forced import speculative_steps
from grid.analysis import Slo
from grid.analysis.cellstats import CellStats
from grid.analysis.forced import forced_length, forced_mask
from grid.analysis.setups import is_baseline
from grid.analysis.surface import (
    Cost,
    ForcedPoint,
    LengthCheck,
    Profile,
    Throughput,
    forced_points,
    length_checks,
    profile_from_cells,
    profile_from_requests,
    surface,
)
from grid.analysis.surface.cells import DRAFT_PART, depth_of, server_args
from grid.questions.measure import done_analysed
from grid.questions.speculation.steps import OWN, chain_length, is_rung
from grid.store.loader import load_cells, load_requests

PROFILE_COLUMNS = ["cell_id", "status", "domain", "accept_histogram"]
"""The request columns a profile reads."""


@dataclass
class Read:
    """A run's forced cells as the surface reads them."""

    forced: dict[int, list[ForcedPoint]] = field(default_factory=dict)
    """Rate index -> its honoured forced points; OWN -> the drafter's own (unforced) points."""
    rate: int = 0
    """The surface's rate index: 0 (forced at rates[0]) or OWN (the drafter's own cells)."""
    baselines: dict[int, Throughput] = field(default_factory=dict)
    """Load -> the baseline's throughput."""
    done: set[str] = field(default_factory=set)
    """The ids of the cells committed as done."""
    table: pd.DataFrame | None = None
    """Their rows."""

    @property
    def costs(self) -> dict[tuple[int, int], Cost]:
        """c(B, k) at the surface's rate (`rate`)."""
        return surface(self.forced.get(self.rate, []), self.baselines)

    @property
    def own_costs(self) -> dict[tuple[int, int], Cost]:
        """c(B, k) of every done cell of the drafter's own (c = L T_b / T_v)."""
        return surface(self.forced.get(OWN, []), self.baselines)

    @property
    def rungs(self) -> dict[int, dict[tuple[int, int], Cost]]:
        """Rate index -> c(B, k) of each other drafter's cells (`grid.search.drafters`)."""
        return {r: surface(points, self.baselines) for r, points in sorted(self.forced.items())
                if is_rung(r)}

    @property
    def length_checks(self) -> list[LengthCheck]:
        """Each (B, k) at two lengths or more, forced or the other drafters'
        (grid/analysis/surface/cost.py)."""
        return length_checks([p for r, points in self.forced.items() if r != OWN
                              for p in points], self.baselines)


def switched_mask(table: pd.DataFrame) -> pd.Series:
    """The cells run with a threshold applied (speculative_disable_above_batch: the threshold's
    confirmation): neither points of the surface nor the drafter's profile (their steps mix
    depths)."""
    if "speculative_disable_above_batch" not in table:
        return pd.Series(False, index=table.index)
    return table.speculative_disable_above_batch.notna()


def rate_index(length: float | None, depth: int | None, rates: Sequence[float]) -> int | None:
    """Which rate's chain forced the mean `length` at `depth`; None: none."""
    if length is None or depth is None:
        return None
    found = [r for r, rate in enumerate(rates) if abs(chain_length(rate, depth) - length) < 1e-6]
    return found[0] if found else None


def read_run(run_dir: Path, slo: Slo, rates: Sequence[float], ids: Iterable[str] | None = None,
             rate: int = 0, rungs: Mapping[str, int] | None = None) -> Read:
    """The done cells among `ids` (every cell when None): each forced cell under the rate that
    forced it, each unforced speculative cell under OWN or, another drafter's (`rungs`: cell id
    -> its rate index), under its own index; the baselines' throughputs by load; `rate`: the
    surface's."""
    rungs = rungs or {}
    found = done_analysed(Path(run_dir), ids, slo)
    if found is None:
        return Read()
    table, stats = found
    forced = forced_mask(table)
    index = [rate_index(forced_length(v), depth_of(table.iloc[[i]]), rates) if f else None
             for i, (v, f) in enumerate(zip(table.forced_acceptance, forced, strict=True))]
    out = Read(done=set(table.cell_id.astype(str)), table=table, rate=rate)
    base = table.variant.astype(str).map(is_baseline)
    switch = switched_mask(table)
    other = [rungs.get(str(c)) for c in table.cell_id]
    for r in [*range(len(rates)), OWN, *sorted(set(rungs.values()))]:
        wanted = [(not f and o == r) if r < OWN else (not (f or s) and o is None) if r == OWN
                  else f for f, o, s in zip(forced, other, switch, strict=True)]
        mask = base | pd.Series([w and (r <= OWN or i == r) for w, i in zip(wanted, index,
                                                                           strict=True)],
                                index=table.index)
        ids_r = set(table.cell_id[mask])
        sub = CellStats(stats.table[stats.table.cell_id.isin(ids_r)].reset_index(drop=True),
                        stats.replicates, stats.slo, stats.n_replicates)
        for points, baselines in forced_points(sub, table[mask], own=r <= OWN).values():
            out.forced.setdefault(r, []).extend(points)
            out.baselines.update(baselines)
    return out


def own_profile(run_dir: Path, table: pd.DataFrame | None, source: str) -> Profile | None:
    """The drafter's profile from the run's done unforced speculative cells that draft (not
    depth 0) with its own draft model (not `grid.search.drafters`): their requests'
    acceptance histograms (by prompt domain), else the cells' per-position counter (by
    workload); None when neither is recorded."""
    if table is None or table.empty:
        return None
    drafts = (table.server_args.map(lambda v: speculative_steps(server_args(v)) != 0)
              if "server_args" in table else True)  # depth 0 drafts nothing: no acceptance
    variants = table.variant.astype(str)
    rungs = variants.map(lambda v: DRAFT_PART.search(v) is not None)  # grid.search.drafters'
    own = table[~forced_mask(table) & ~variants.map(is_baseline) & drafts & ~rungs
                & ~switched_mask(table)]
    if own.empty:
        return None
    requests = load_requests(run_dir, columns=PROFILE_COLUMNS,
                             filters=[("cell_id", "in", sorted(own.cell_id))])
    try:
        return profile_from_requests(requests, "domain", own, source=source)
    except ValueError:
        pass
    try:
        return profile_from_cells(own, source=source)
    except ValueError:
        return None


def run_profile(run_dir: Path) -> Profile | None:
    """The drafter's profile from a run folder's done, unforced speculative cells (`own_profile`;
    `grid.search.profile=RUN`, `python -m grid.profile RUN`); None without one."""
    if not (Path(run_dir) / "cells").is_dir():
        raise ValueError(f"{run_dir} is not a run folder (no cells/)")
    table = load_cells(run_dir)
    if table is None or table.empty:
        return None
    return own_profile(Path(run_dir), table[table.status == "done"], str(run_dir))
