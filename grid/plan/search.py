"""The plan side every adaptive search shares (`grid.search`, docs/questions.md): the checks, the
space and the cells a question may choose (ordinary cells)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from grid.analysis.search import Space, make_space
from grid.plan.build import Plan
from grid.plan.cells import Cell, group_by_server, make_cell

SEARCHED_AXES = ("concurrency", "load.concurrency", "repeat", "load.repeat", "rate",
                 "load.rate")
"""Axes the search sets itself: a grid axis of them would fight it."""
BASELINE = "baseline"
LENGTH_KEY = "variant.forced_acceptance.length"


class SearchError(ValueError):
    """A search that cannot run; one line (grid/run.py turns it into exit 2)."""


def search_kind(cfg: DictConfig) -> str | None:
    return OmegaConf.select(cfg, "grid.search.kind", default=None)


def check_search(cfg: DictConfig) -> None:
    """What every question checks of `grid.search` on the composed config."""
    kind = search_kind(cfg)
    bounds = list(cfg.grid.search.concurrency or [])
    if (len(bounds) != 2 or not all(isinstance(b, int) and not isinstance(b, bool)
                                    for b in bounds) or not 1 <= bounds[0] < bounds[1]):
        raise SearchError("grid.search.concurrency must be [lowest, highest] whole streams "
                          f"with 1 <= lowest < highest, got {bounds}")
    for axis in cfg.grid.axes:
        if axis in SEARCHED_AXES:
            raise SearchError(f"grid.search.kind={kind} chooses the concurrency and the "
                              f"repeats itself; drop the grid axis {axis}")
    if cfg.grid.include:
        raise SearchError(f"grid.search.kind={kind} cannot take extra cells (grid.include)")
    if cfg.load.rate is not None:
        raise SearchError(f"grid.search.kind={kind} searches closed-loop concurrency; unset "
                          "load.rate")


def search_space(cfg: DictConfig) -> Space:
    s = cfg.grid.search
    low, high = (int(b) for b in s.concurrency)
    return make_space(low, high, float(s.resolution), int(s.coarse_levels), int(s.max_cells))


def check_one_against_baseline(cells: Sequence[Cell], compares: str) -> None:
    """SearchError unless the baseline and one other variant on one workload (`compares`)."""
    variants = sorted({c.config["variant"]["name"] for c in cells})
    labels = sorted({c.workload for c in cells})
    if BASELINE not in variants or len(variants) != 2 or len(labels) != 1:
        raise SearchError(f"grid.search.kind={compares} with the baseline on one workload; the "
                          f"grid has variants {', '.join(variants)} and workloads "
                          f"{', '.join(labels)}")


def universe_grid(cfg: DictConfig, space: Space) -> DictConfig:
    """The config whose grid is its own axes x the lattice, repeat 0."""
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    assert isinstance(out, DictConfig)
    axes: dict[str, Any] = OmegaConf.to_container(cfg.grid.axes, resolve=True)  # type: ignore[assignment]
    out.grid.axes = {**axes, "concurrency": list(space.lattice), "repeat": [0]}
    return out


def with_settings(cell: Cell, settings: dict[str, Any]) -> Cell:
    """`cell` with config keys set (dotted), made as a composed cell with those factors is
    (make_cell): the keys are plain values, and a Hydra compose each would cost seconds."""
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


def step_plan(plan: Plan, cells: Sequence[Cell]) -> Plan:
    """The run's plan narrowed to some of its cells (the controller runs a Plan)."""
    return dataclasses.replace(plan, cells=list(cells), groups=group_by_server(cells))
