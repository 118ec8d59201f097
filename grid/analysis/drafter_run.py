"""The drafter's acceptance from an earlier run (`breakeven.drafter_run`, `python -m grid.report
RUN --drafter-run OLD`): the per-domain accept lengths its unforced speculative cells measured,
placed on this run's break-even curve (grid/analysis/breakeven.py) or on the plan's predicted
one, labelled with the earlier run's id. A length is the drafter's at the speculative depth it
was measured at (more drafts per step accept a different length): a configuration measured at
another depth than the curve's is refused (`DrafterRun.pick`). Pure: pandas in, plain values
out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from grid.analysis.bootstrap import DEFAULT_REPLICATES
from grid.analysis.breakeven import Level
from grid.analysis.breakeven_cells import depth_of
from grid.analysis.breakeven_drafter import Drafter, Measured, drafter_lengths, place
from grid.analysis.forced import forced_mask


def speculative_configurations(requests: pd.DataFrame, cells: pd.DataFrame) -> list[str]:
    """The variant labels of the unforced cells whose ok requests counted verify steps (the
    configurations whose drafter the run measured), sorted."""
    variant_of = dict(zip(cells.cell_id.astype(str), cells.variant.astype(str), strict=True))
    ids = set(cells.cell_id.astype(str)[~forced_mask(cells)])
    speculated = requests[requests.cell_id.astype(str).isin(ids) & (requests.status == "ok")
                          & (requests.spec_verify_ct.fillna(0) > 0)]
    return sorted({variant_of[c] for c in speculated.cell_id.astype(str)})


@dataclass(frozen=True)
class DrafterRun:
    """An earlier run's drafter: per speculative configuration, its length per prompt domain
    over all its workloads' requests."""

    run_id: str
    lengths: Mapping[str, Mapping[str, Measured]]
    """configuration -> domain -> (requests, decode accept length, its interval)."""
    path: str = ""
    """The run folder, absolute (what a report records, to read it again)."""
    depths: Mapping[str, int | None] = field(default_factory=dict)
    """configuration -> the speculative depth (speculative_num_steps) its cells were served
    at (None or absent: not recorded, as in runs written before cells recorded their args)."""

    def pick(self, config: str, depth: int | None) -> str:
        """The configuration of this run measured for `config` (a curve or plan served at
        speculative depth `depth`; None: not known): the one with the same label, else its
        only one; ValueError (one line) naming the candidates when neither, or naming both
        depths when they are known and differ."""
        if config in self.lengths:
            source = config
        elif len(self.lengths) == 1:
            source = next(iter(self.lengths))
        else:
            raise ValueError(f"drafter run {self.run_id} has no configuration {config!r} and "
                             f"several others ({', '.join(sorted(self.lengths))}): which "
                             "drafter is meant is not clear; give a run with that "
                             "configuration or only one")
        theirs = self.depths.get(source)
        if depth is not None and theirs is not None and theirs != depth:
            raise ValueError(f"drafter run {self.run_id} measured {source} at depth {theirs} "
                             f"(speculative_num_steps), {config} here is at depth {depth}: an "
                             "accept length does not carry over to another depth; give a run "
                             f"measured at depth {depth}")
        return source


def drafter_run(run_id: str, requests: pd.DataFrame, cells: pd.DataFrame,
                replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> DrafterRun:
    """A run's drafter lengths (`speculative_configurations`, each over every workload);
    ValueError (one line) for a run without an unforced speculative cell to measure them."""
    lengths, depths = {}, {}
    unforced = cells[~forced_mask(cells)]
    for config in speculative_configurations(requests, cells):
        depths[config] = depth_of(unforced[unforced.variant.astype(str) == config])
        found = drafter_lengths(requests, cells, config, None, replicates, seed)
        finite = {d: m for d, m in found.items() if math.isfinite(m[1])}
        if finite:
            lengths[config] = finite
    if not lengths:
        raise ValueError(f"run {run_id} has no unforced speculative cell (requests with verify "
                         "steps counted) to measure the drafter's accept length from")
    return DrafterRun(run_id, lengths, depths=depths)


def placed_from(levels: Sequence[Level], run: DrafterRun) -> list[Drafter]:
    """The earlier run's lengths on every (configuration, workload) curve of `levels`, per
    prompt domain, labelled with its run id; ValueError (`DrafterRun.pick`) when a curve's
    configuration has no clear counterpart there, or one measured at another depth."""
    out = []
    for config, workload in sorted({(lv.configuration, lv.workload) for lv in levels}):
        depth = next((lv.depth for lv in levels if lv.configuration == config
                      and lv.depth is not None), None)
        measured = run.lengths[run.pick(config, depth)]
        out += [place(levels, config, workload, d, m, run.run_id)
                for d, m in sorted(measured.items())]
    return out
