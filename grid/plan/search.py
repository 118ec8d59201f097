"""The plan side every adaptive search shares (`grid.search`, docs/search.md): the checks, the
space, the cells a question may choose (ordinary cells) and the twin asked first."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from engines.twin_data import SpeedupQuestion
from grid.analysis.search import Space, make_space
from grid.plan.build import Plan
from grid.plan.cells import Cell, group_by_server, make_cell
from grid.plan.workloads import CHARS_PER_TOKEN, WorkloadPlan

SEARCHED_AXES = ("concurrency", "load.concurrency", "repeat", "load.repeat", "rate",
                 "load.rate")
"""Axes the search sets itself: a grid axis of them would fight it."""
BASELINE = "baseline"
LENGTH_KEY = "variant.forced_acceptance.length"
DEFAULT_LENGTHS = 9
"""Forced lengths from 1 to k + 1 when grid.search.lengths is unset."""


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
    prior = OmegaConf.select(cfg, "grid.search.prior", default=None)
    if prior is not None and not Path(str(prior)).expanduser().is_file():
        raise SearchError(f"grid.search.prior={prior}: no such file (a twin's profile: "
                          "python -m grid.twin results/RUN writes results/RUN/twin.json)")


def search_space(cfg: DictConfig) -> Space:
    s = cfg.grid.search
    low, high = (int(b) for b in s.concurrency)
    return make_space(low, high, float(s.resolution), int(s.coarse_levels), int(s.max_cells),
                      int(s.max_repeats), int(s.points_per_step), float(s.min_effect))


def breakeven_lengths(cfg: DictConfig, steps: int) -> tuple[float, ...]:
    """grid.search.lengths, checked (ascending, >= 2, within [1, k + 1]); unset: DEFAULT_LENGTHS
    evenly from 1 to k + 1."""
    raw = OmegaConf.select(cfg, "grid.search.lengths", default=None)
    if raw is None:
        n = DEFAULT_LENGTHS
        return tuple(round(1.0 + steps * i / (n - 1), 4) for i in range(n))
    values = OmegaConf.to_container(raw, resolve=True) if not isinstance(raw, list) else raw
    lengths = list(values) if isinstance(values, list) else []
    if (len(lengths) < 2 or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                    for v in lengths)
            or lengths != sorted(set(lengths)) or lengths[0] < 1 or lengths[-1] > steps + 1):
        raise SearchError("grid.search.lengths must be 2 or more ascending accept lengths in "
                          f"[1, {steps + 1}] (k = speculative_num_steps = {steps}), got "
                          f"{lengths}")
    return tuple(float(v) for v in lengths)


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


def with_twins(cells: Sequence[Cell], workloads: WorkloadPlan, key: str,
               values: Sequence[Any], keep: Any = None) -> list[Cell]:
    """Each cell (but those `keep(cell)`) once per value of the config key `key`."""
    out = []
    for cell in cells:
        if keep is not None and keep(cell):
            out.append(cell)
            continue
        for value in values:
            twin = with_settings(cell, {key: value})
            if cell.cell_id in workloads.alignments:
                workloads.alignments[twin.cell_id] = workloads.alignments[cell.cell_id]
            out.append(twin)
    return out


def with_repeats(cells: Sequence[Cell], workloads: WorkloadPlan, space: Space) -> list[Cell]:
    """The cells, then each with its repeats 1 .. max_repeats - 1 (`load.repeat`)."""
    return [*cells, *with_twins(cells, workloads, "load.repeat", range(1, space.max_repeats))]


def ask_twin(path: str, base: Cell, variant: Cell, loads: Sequence[int],
             workloads: WorkloadPlan) -> tuple[Path, str, tuple[float, ...]]:
    """(the twin's file, its label, the speedup of `variant` over `base` it predicts at each of
    `loads` on the variant's workload), from engines.twin_modeller(); SearchError for a file
    it cannot read."""
    file = Path(str(path)).expanduser().resolve()
    prompts = workloads.prompts.get(str(variant.config["workload"]["name"]), ())
    lengths = [-(-len(p.text) // CHARS_PER_TOKEN) for p in prompts] or [1]
    labels = [p.domain for p in prompts] or ["general"]
    question = SpeedupQuestion(
        baseline=base.config, variant=variant.config, tp_size=variant.tp_size,
        loads=tuple(loads), prompt_tokens=sum(lengths) / len(lengths),
        domains={d: labels.count(d) / len(labels) for d in sorted(set(labels))},
        requests_per_stream=variant.num_requests / max(1, variant.concurrency or 1))
    modeller = engines.twin_modeller()
    try:
        predicted = modeller.predict_speedups(str(file), question)
        source = modeller.provenance({"profile": str(file)})
    except ValueError as e:
        raise SearchError(f"grid.search.prior={path}: {e}") from None
    return file, f"SIMULATION ({source or file.name})", tuple(predicted)


def step_plan(plan: Plan, cells: Sequence[Cell]) -> Plan:
    """The run's plan narrowed to some of its cells (the controller runs a Plan)."""
    return dataclasses.replace(plan, cells=list(cells), groups=group_by_server(cells))
