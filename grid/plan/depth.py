"""The plan side of the depth search (`grid.search.kind=depth`, docs/search.md): its checks
(one line, exit 2, before anything starts), its space, every cell it may choose and what the
plan prints. The steps are grid/analysis/depth.py and depth_confirm.py (pure); the loop that
runs them is grid/execute/search.py's.

A depth cell is an ordinary cell: the baseline's at depth 0, else the grid's speculative
variant composed with `variant.args.speculative_num_steps=d`, at `load.concurrency=c` and
`load.repeat=r` (the id a dense grid of those factors gives the same cell). The confirmation's
cells are the variant with `variant.speculative_depth=<the schedule>` (or `<the threshold
schedule>`) and with `variant.speculative_adaptive=true`, planned when the search chooses
them."""

from __future__ import annotations

import copy
import dataclasses
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from grid.analysis.depth import (
    DepthPoint,
    DepthSpace,
    DepthStep,
    Schedule,
    prior_depths,
    replay_depth,
)
from grid.analysis.depth_confirm import SCHEDULE, THRESHOLD, describe
from grid.analysis.search import Space
from grid.plan.cells import Cell, make_cell
from grid.plan.search import BASELINE, SearchError, ask_twin, check_one_against_baseline
from grid.plan.specs import server_request
from grid.plan.workloads import WorkloadPlan

STEPS_ARG = "speculative_num_steps"
STEPS_KEY = f"variant.args.{STEPS_ARG}"
"""The factor that makes a depth cell: the speculative variant at that many draft steps."""
OWN_KEYS = ("speculative_disable_above_batch", "speculative_depth", "speculative_adaptive")
"""Variant keys the depth search sets itself."""


def depth_space(cfg: DictConfig, space: Space) -> DepthSpace:
    """The crossover search's lattice and budget with the depths to compare; SearchError for
    depths that are not `[0, d1, d2, ...]` ascending."""
    raw = OmegaConf.to_container(cfg.grid.search.depths, resolve=True)
    depths = list(raw) if isinstance(raw, list) else []
    if (not all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
            or len(depths) < 2 or depths[0] != 0 or depths != sorted(set(depths))):
        raise SearchError("grid.search.depths must be ascending whole depths from 0 (the "
                          "baseline), with at least one speculative depth, e.g. [0, 1, 3, 5]; "
                          f"got {depths}")
    return DepthSpace(space.lattice, space.coarse, tuple(depths), space.max_cells,
                      space.max_repeats, space.min_effect)


def depth_universe(cells: Sequence[Cell], depths: Sequence[int], workloads: WorkloadPlan
                   ) -> tuple[list[Cell], Cell]:
    """The baseline's cells as they are (depth 0) and, for each of the speculative variant's
    cells, one cell per positive depth: its config with speculative_num_steps = d, made by
    the composition rule (make_cell) a dense grid of that factor gives; and the variant's own
    cell at the lowest load (what the confirmation's cells are made from). Alignments follow
    the cells. SearchError for a grid that is not the baseline and one speculative variant on
    one workload."""
    check_one_against_baseline(cells, "depth compares one speculative variant's depths")
    out = []
    own = [c for c in cells if c.config["variant"]["name"] != BASELINE]
    for cell in cells:
        if cell.config["variant"]["name"] == BASELINE:
            out.append(cell)
            continue
        for d in depths:
            if d > 0:
                twin = with_settings(cell, {STEPS_KEY: d})
                if cell.cell_id in workloads.alignments:
                    workloads.alignments[twin.cell_id] = workloads.alignments[cell.cell_id]
                out.append(twin)
    return out, min(own, key=lambda c: c.concurrency or 0)


def with_settings(cell: Cell, settings: dict[str, Any]) -> Cell:
    """`cell` with config keys set (dotted: `variant.args.x`, `load.concurrency`), as a
    composed cell with those factors would be."""
    config = copy.deepcopy(cell.config)
    factors = dict(cell.factors)
    for key, value in settings.items():
        node = config
        *path, leaf = key.split(".")
        for part in path:
            node = node[part]
        node[leaf] = value
        factors[{"load.concurrency": "concurrency", "load.repeat": "repeat"}.get(key, key)] = \
            value
    return make_cell(factors, config, cell.prompts_digest, cell.engine_version)


@dataclass
class DepthSetup:
    """A planned depth search: its space and the cells of every depth point it may choose."""

    space: DepthSpace
    points: dict[DepthPoint, Cell]
    variant: str
    workload: str
    engine: str
    adaptive: bool
    """Whether the engine adapts the depth at run time for the variant (the confirmation then
    compares the schedule with that too)."""
    confirm_cells: int
    template: Cell
    """The speculative variant's own cell at the range's lowest load: what the confirmation's
    cells are made from."""
    schedule: Schedule | None = field(default=None)
    """The schedule the last replay found (it names the confirmation's schedule cells)."""
    threshold: Schedule | None = field(default=None)
    """Its threshold schedule (grid/analysis/depth_confirm.py threshold_schedule), if any."""
    prior: tuple[str, str, dict[int, tuple[float, ...]]] | None = field(default=None)
    """(the twin's file, its label, each positive depth's predicted speedup at every lattice
    level) when a twin was asked first (grid.search.prior)."""

    @property
    def variant_cell(self) -> Cell:
        """A planned speculative cell (its alignment is the confirmation cells')."""
        return self.points[min(p for p in self.points if p[1] > 0)]

    def describe(self, point: Sequence[int]) -> str:
        return describe(point)

    def cell(self, point: Sequence[int]) -> Cell:
        """The cell of a point: a depth point's from the plan, the confirmation's made here."""
        load, setting, repeat = point
        if setting >= 0:
            return self.points[(load, setting, repeat)]
        settings: dict[str, Any] = {"load.concurrency": load, "load.repeat": repeat}
        if setting in (SCHEDULE, THRESHOLD):
            tiers = self.schedule if setting == SCHEDULE else self.threshold
            assert tiers is not None, "the schedules are known once the search stopped"
            settings["variant.speculative_depth"] = [list(t) for t in tiers]
        else:
            settings["variant.speculative_adaptive"] = True
        return with_settings(self.template, settings)

    def cells_of(self, points: Sequence[Sequence[int]], first: str | None = None
                 ) -> list[Cell]:
        """The points' cells, each server's in ascending load: variant `first` first (its
        server may still run from the previous step), then by depth."""
        cells = [self.cell(p) for p in sorted(tuple(p) for p in points)]
        order = {c.variant: i for i, c in enumerate(
            sorted(cells, key=lambda c: (c.variant != first, c.variant != BASELINE)))}
        return sorted(cells, key=lambda c: (order[c.variant], c.concurrency or 0))

    def first_step(self) -> DepthStep:
        return replay_depth(self.space, {})[0]

    def setting(self, tiers: Schedule) -> dict[str, Any] | None:
        """The schedule in the engine's words (Engine.depth_setting): the flags to paste, the
        files they name, the depth each running batch gets there."""
        cell = with_settings(self.template,
                             {"variant.speculative_depth": [list(t) for t in tiers]})
        setting = engines.get(self.engine).depth_setting(server_request(cell.config))
        if setting is None:
            return None
        return {"engine": setting.engine, "flags": list(setting.flags),
                "command": " ".join(shlex.quote(f) for f in setting.flags),
                "files": dict(setting.files),
                "tiers": [list(t) for t in setting.tiers]}

    def as_json(self) -> dict:
        out = {"kind": "depth", "baseline": BASELINE, "variant": self.variant,
               "workload": self.workload, "load_kind": "concurrency",
               "depths": list(self.space.depths), "engine": self.engine,
               "adaptive": self.adaptive, "confirm_cells": self.confirm_cells}
        if self.prior:
            path, label, speedups = self.prior
            out["prior"] = {"path": path, "source": label,
                            "predicted_speedup": {str(d): [round(v, 4) for v in values]
                                                  for d, values in speedups.items()},
                            "predicted_best": [list(p) for p in self.space.prior]}
        return out

    def plan_lines(self) -> list[str]:
        space, first = self.space, self.first_step()
        alternatives = ("the baseline, the best single depth, the threshold schedule (that "
                        "depth, off where the schedule turns speculation off)") + (
            " and the engine's own adaptation" if self.adaptive else "")
        return [
            f"search: depth of {self.variant} by load on {self.workload}: depths "
            f"{' '.join(str(d) for d in space.depths)} (0 = {BASELINE}), concurrency "
            f"{space.lattice[0]}..{space.lattice[-1]}",
            f"  lattice ({len(space.lattice)} levels): {' '.join(map(str, space.lattice))}; "
            f"coarse levels {' '.join(map(str, space.coarse))}",
            f"  budget: grid.search.max_cells={space.max_cells} (a dense grid of these levels "
            f"and depths: {len(space.lattice) * len(space.depths)} cells), then up to "
            f"grid.search.confirm_cells={self.confirm_cells} confirming the schedule against "
            f"{alternatives}",
            *([f"  prior: {self.prior[1]} predicts the best depth "
               + ", ".join(f"c={c} {d}" for c, d in space.prior)] if self.prior else []),
            f"  step 1: {first.why} -> {len(first.points)} cells (listed below); later steps "
            "follow from the committed cells",
        ]


def depth_setup(space: DepthSpace, cells: Sequence[Cell], template: Cell,
                confirm_cells: int) -> DepthSetup:
    """The universe's cells by point (`depth_universe`'s, with their repeats); SearchError for
    a variant that sets the depth itself, or a variant or engine that cannot run a depth
    schedule (checked on the engine's own spelling of a one-tier schedule)."""
    points: dict[DepthPoint, Cell] = {}
    for cell in cells:
        variant = cell.config["variant"]
        depth = 0 if variant["name"] == BASELINE else int(variant["args"][STEPS_ARG])
        points[(int(cell.concurrency or 0), depth, int(cell.config["load"]["repeat"]))] = cell
    speculative = next(c for c in cells if c.config["variant"]["name"] != BASELINE)
    template = template.with_engine_version(speculative.engine_version)  # as the plan's cells
    variant = template.config["variant"]
    given = [k for k in OWN_KEYS if variant.get(k) not in (None, False)]
    if given:
        raise SearchError(f"grid.search.kind=depth sets {given[0]} itself; variant "
                          f"{variant['name']} already sets it")
    engine_name = str(template.config["engine"]["name"])
    kind = engines.get(engine_name)
    setup = DepthSetup(space, points, template.variant, template.workload, engine_name,
                       kind.adaptive_refusal(variant) is None, confirm_cells, template)
    try:
        ok = setup.setting(((1, max(space.depths)),)) is not None
    except ValueError as e:
        raise SearchError(f"grid.search.kind=depth: variant {variant['name']} on {kind.label}: "
                          f"{e}") from None
    if not ok:
        raise SearchError(f"grid.search.kind=depth: {kind.label} cannot set the speculative "
                          "depth by batch size")
    return setup


def with_depth_prior(setup: DepthSetup, path: str | None, workloads: WorkloadPlan
                     ) -> DepthSetup:
    """The setup with a twin asked first (grid.search.prior): its predicted speedup of every
    positive depth over the baseline at every lattice level (grid/plan/search.py `ask_twin`),
    and from them the depth each level's first cells go to (grid/analysis/depth.py
    prior_depths, first_depths)."""
    if path is None:
        return setup
    space = setup.space
    low = space.lattice[0]
    base = setup.points[(low, 0, 0)]
    speedups: dict[int, tuple[float, ...]] = {}
    file, label = None, ""
    for depth in space.depths[1:]:
        file, label, speedups[depth] = ask_twin(path, base, setup.points[(low, depth, 0)],
                                                space.lattice, workloads)
    best = prior_depths(space.depths, space.lattice, speedups)
    return dataclasses.replace(setup, space=dataclasses.replace(space, prior=best),
                               prior=(str(file), label, speedups))
