"""The plan side of an adaptive search (`grid.search.kind=crossover|threshold`,
docs/search.md): its checks (one line, exit 2, before anything starts), its space (the lattice
of loads, the budget), the grid of every cell it may choose (each an ordinary cell: same id
rules, results and resume) and what the plan prints. The search's steps are
grid/analysis/search.py and threshold.py (pure); the loop that runs them is
grid/execute/search.py."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from engines.twin_data import SpeedupQuestion
from grid.analysis.search import Point, Space, Step, make_space, next_step, prior_levels
from grid.analysis.threshold import Pair, describe_point, reserve_cells
from grid.plan.build import Plan
from grid.plan.cells import Cell, group_by_server, make_cell
from grid.plan.workloads import CHARS_PER_TOKEN, WorkloadPlan

SEARCHED_AXES = ("concurrency", "load.concurrency", "repeat", "load.repeat", "rate",
                 "load.rate")
"""Axes the search sets itself: a grid axis of them would fight it."""
BASELINE = "baseline"


class SearchError(ValueError):
    """A search that cannot run; one line (grid/run.py turns it into exit 2)."""


def check_one_against_baseline(cells: Sequence[Cell], compares: str) -> None:
    """SearchError unless the grid holds the baseline and one other variant (by name) on one
    workload; `compares` says what the search compares (`breakeven compares one speculative
    variant`), the line then names what the grid holds."""
    variants = sorted({c.config["variant"]["name"] for c in cells})
    labels = sorted({c.workload for c in cells})
    if BASELINE not in variants or len(variants) != 2 or len(labels) != 1:
        raise SearchError(f"grid.search.kind={compares} with the baseline on one workload; the "
                          f"grid has variants {', '.join(variants)} and workloads "
                          f"{', '.join(labels)}")


def search_kind(cfg: DictConfig) -> str | None:
    return OmegaConf.select(cfg, "grid.search.kind", default=None)


def check_search(cfg: DictConfig) -> None:
    """Everything about `grid.search` that can be checked on the composed config (the kind
    itself: grid/questions/ `question`, its registry)."""
    kind = search_kind(cfg)
    if kind is None:
        return
    if kind == "threshold":
        reserve = reserve_cells(int(cfg.grid.search.candidates))
        if int(cfg.grid.search.max_cells) < reserve + 4:
            raise SearchError(f"grid.search.max_cells={cfg.grid.search.max_cells} leaves the "
                              f"crossover search fewer than 4 cells after the {reserve} kept "
                              f"for confirming {cfg.grid.search.candidates} candidates")
    bounds = list(cfg.grid.search.concurrency or [])
    if (len(bounds) != 2 or not all(isinstance(b, int) and not isinstance(b, bool)
                                    for b in bounds) or not 1 <= bounds[0] < bounds[1]):
        raise SearchError("grid.search.concurrency must be [lowest, highest] whole streams "
                          f"with 1 <= lowest < highest, got {bounds}")
    for axis in cfg.grid.axes:
        if kind == "breakeven" and str(axis).startswith("variant.forced_acceptance"):
            raise SearchError(f"grid.search.kind=breakeven chooses the forced lengths itself "
                              f"(grid.search.lengths); drop the grid axis {axis}")
        if axis in SEARCHED_AXES:
            raise SearchError(f"grid.search.kind={kind} chooses the concurrency and the "
                              f"repeats itself; drop the grid axis {axis}")
    if cfg.grid.include:
        raise SearchError(f"grid.search.kind={kind} cannot take extra cells (grid.include)")
    if cfg.load.rate is not None:
        raise SearchError(f"grid.search.kind={kind} searches closed-loop concurrency; unset "
                          "load.rate")
    prior = OmegaConf.select(cfg, "grid.search.prior", default=None)
    if prior is not None:
        if not Path(str(prior)).expanduser().is_file():
            raise SearchError(f"grid.search.prior={prior}: no such file (a twin's profile: "
                              "python -m grid.twin results/RUN writes results/RUN/twin.json)")


def search_space(cfg: DictConfig) -> Space:
    s = cfg.grid.search
    low, high = (int(b) for b in s.concurrency)
    return make_space(low, high, float(s.resolution), int(s.coarse_levels), int(s.max_cells),
                      int(s.max_repeats), int(s.points_per_step), float(s.min_effect))


def universe_grid(cfg: DictConfig, space: Space) -> DictConfig:
    """The config whose grid holds the first repeat of every cell the search may choose: the
    grid's own axes (variant, workload) x the lattice (`with_repeats` adds the others)."""
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    assert isinstance(out, DictConfig)
    axes: dict[str, Any] = OmegaConf.to_container(cfg.grid.axes, resolve=True)  # type: ignore[assignment]
    out.grid.axes = {**axes, "concurrency": list(space.lattice), "repeat": [0]}
    return out


def with_repeats(cells: Sequence[Cell], workloads: WorkloadPlan, space: Space) -> list[Cell]:
    """Each cell with its repeats 1 .. max_repeats - 1: the composed config with load.repeat
    set, made into a cell by the same rule (make_cell) as a composed `++load.repeat=k` (the
    repeat is a plain value nothing else interpolates; composing each would cost a Hydra
    compose per cell). Alignments follow the cells."""
    out = list(cells)
    for cell in cells:
        for k in range(1, space.max_repeats):
            config = copy.deepcopy(cell.config)
            config["load"]["repeat"] = k
            twin = make_cell({**cell.factors, "repeat": k}, config, cell.prompts_digest,
                             cell.engine_version)
            if cell.cell_id in workloads.alignments:
                workloads.alignments[twin.cell_id] = workloads.alignments[cell.cell_id]
            out.append(twin)
    return out


@dataclass(frozen=True)
class Threshold:
    """What a threshold search ranks and confirms (grid/analysis/threshold.py)."""

    honoured: tuple[int, ...]
    """The speculative_disable_above_batch values the engine tells apart for the variant
    (Engine.threshold_values), ascending."""
    candidates: int
    """Top-ranked values confirmed (grid.search.candidates)."""

    @property
    def reserve(self) -> int:
        """Cells the crossover search leaves for the confirmation: one point per pair."""
        return reserve_cells(self.candidates)


@dataclass(frozen=True)
class Prior:
    """What the search asked before measuring (grid.search.prior): a twin's predictions."""

    path: str
    label: str
    """Where the numbers come from, in words (`SIMULATION (twin of RUN)`)."""
    predicted: tuple[float, ...]
    """The predicted speedup at each lattice level."""


@dataclass(frozen=True)
class SearchSetup:
    """A planned search: its space, and the cells of every point it may choose."""

    space: Space
    points: dict[Point, tuple[Cell, Cell]]
    """(load, repeat) -> (baseline cell, variant cell)."""
    variant: str
    workload: str
    threshold: Threshold | None = None
    """kind=threshold: the values to rank; None for kind=crossover."""
    prior: Prior | None = None
    """The twin asked first (its predicted crossover chose the first levels), if any."""

    def pair_cells(self, pair: Pair) -> tuple[Cell, Cell]:
        """A confirmation point's cells: the variant with each threshold, both at concurrency
        = the higher one, repeat as given. Made from the variant's planned cell by the rule
        `with_repeats` uses (make_cell on the config with the keys set), so each is the cell a
        composed `variant.speculative_disable_above_batch=T load.concurrency=C` would be."""
        low, high, repeat = pair
        template = self.points[(self.space.lattice[0], repeat)][1]
        out = []
        for value in (low, high):
            config = copy.deepcopy(template.config)
            config["variant"]["speculative_disable_above_batch"] = value
            config["load"]["concurrency"] = high
            factors = {**template.factors, "variant.speculative_disable_above_batch": value,
                       "concurrency": high}
            out.append(make_cell(factors, config, template.prompts_digest,
                                 template.engine_version))
        return out[0], out[1]

    def cells_of(self, points: Sequence[Point | Pair], first: str | None = None) -> list[Cell]:
        """The points' cells (a Pair's: `pair_cells`), each server's in ascending load:
        variant `first` first (the one whose server is still running from the previous
        step), else the baseline."""
        cells = [c for p in sorted(points)
                 for c in (self.points[p] if len(p) == 2 else self.pair_cells(p))]  # type: ignore[index,arg-type]
        lead = first if first is not None else BASELINE
        return sorted(cells, key=lambda c: c.variant != lead)

    @property
    def variant_cell(self) -> Cell:
        """The compared variant's planned cell at the lowest load (its alignment is the
        confirmation cells')."""
        return self.points[min(self.points)][1]

    def describe(self, point: Sequence[int]) -> str:
        return describe_point(point)

    def plan_lines(self) -> list[str]:
        return search_lines(self)

    def first_step(self) -> Step:
        reserve = self.threshold.reserve if self.threshold else 0
        return next_step(dataclasses.replace(self.space,
                                             max_cells=self.space.max_cells - reserve), {})

    def as_json(self) -> dict:
        out: dict[str, Any] = {
            "kind": "threshold" if self.threshold else "crossover", "baseline": BASELINE,
            "variant": self.variant, "workload": self.workload, "load_kind": "concurrency"}
        if self.threshold:
            out["honoured"] = list(self.threshold.honoured)
            out["candidates"] = self.threshold.candidates
        if self.prior:
            out["prior"] = {"path": self.prior.path, "source": self.prior.label,
                            "predicted": {str(c): round(v, 4) for c, v in
                                          zip(self.space.lattice, self.prior.predicted,
                                              strict=True)}}
        return out


def search_setup(space: Space, cells: Sequence[Cell], kind: str = "crossover",
                 candidates: int = 2, hardware: str | None = None) -> SearchSetup:
    """The universe's cells by point; a grid that is not one variant against the baseline on
    one workload is a SearchError naming what it holds, as is a threshold search on an engine
    that cannot switch speculation off by batch size."""
    points: dict[Point, list[Cell]] = {}
    for cell in cells:
        point = (int(cell.concurrency or 0), int(cell.config["load"]["repeat"]))
        points.setdefault(point, []).append(cell)
    variants = sorted({c.variant for c in cells})
    workloads = sorted({c.workload for c in cells})
    others = [v for v in variants if v != BASELINE]
    if (BASELINE not in variants or len(others) != 1 or len(workloads) != 1
            or any(len(v) != 2 for v in points.values())):
        raise SearchError(f"grid.search.kind={kind} compares one variant with the baseline "
                          f"on one workload; the grid has variants {', '.join(variants)} and "
                          f"workloads {', '.join(workloads)} "
                          f"({max(len(v) for v in points.values())} cells per load)")
    ordered: dict[Point, tuple[Cell, Cell]] = {}
    for p, v in points.items():
        base, var = sorted(v, key=lambda c: c.variant != BASELINE)
        ordered[p] = (base, var)
    threshold = None
    if kind == "threshold":
        threshold = Threshold(honoured_values(ordered[min(ordered)][1], hardware), candidates)
    return SearchSetup(space, ordered, others[0], workloads[0], threshold)


def ask_twin(path: str, base: Cell, variant: Cell, loads: Sequence[int],
             workloads: WorkloadPlan) -> tuple[Path, str, tuple[float, ...]]:
    """(the twin's file, its label, the speedup of `variant` over `base` it predicts at each
    of `loads` for the variant's workload: its prompts' lengths and domains, its output
    length, the variant's running-batch cap). The twin is the modelling engine's
    (engines.twin_modeller(): its fitted profile, its closed form); SearchError (one line) for a
    file it cannot read."""
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


def with_prior(setup: SearchSetup, path: str | None, workloads: WorkloadPlan) -> SearchSetup:
    """The setup with a twin asked first (grid.search.prior): its predicted speedup at every
    lattice level for the searched variant and workload (`ask_twin`), and the first levels
    they give (grid/analysis/search.py prior_levels)."""
    if path is None:
        return setup
    base, variant = setup.points[(setup.space.lattice[0], 0)]
    file, label, predicted = ask_twin(path, base, variant, setup.space.lattice, workloads)
    space = dataclasses.replace(setup.space, first=prior_levels(setup.space.lattice, predicted),
                                prior=label)
    return dataclasses.replace(setup, space=space,
                               prior=Prior(str(file), label, predicted))


def honoured_values(cell: Cell, hardware: str | None) -> tuple[int, ...]:
    """The thresholds the variant's engine tells apart; SearchError when it has none."""
    variant = cell.config["variant"]
    engine_name = cell.config["engine"]["name"]
    if variant.get("speculative_disable_above_batch") is not None:
        raise SearchError("grid.search.kind=threshold sets speculative_disable_above_batch "
                          f"itself; variant {variant['name']} already sets it")
    try:
        values = engines.get(engine_name).threshold_values(variant, hardware)
    except ValueError as e:
        raise SearchError(f"grid.search.kind=threshold: {e}") from None
    if not values:
        raise SearchError(f"grid.search.kind=threshold: engine {engine_name} cannot switch "
                          f"speculation off by batch size for variant {variant['name']}")
    return tuple(values)


def step_plan(plan: Plan, cells: Sequence[Cell]) -> Plan:
    """The run's plan narrowed to some of its cells (the controller runs a Plan)."""
    return dataclasses.replace(plan, cells=list(cells), groups=group_by_server(cells))


def search_lines(setup: SearchSetup, dense_cells: int | None = None) -> list[str]:
    """What the plan says about the search: question, lattice, budget, first step."""
    space, first = setup.space, setup.first_step()
    dense = dense_cells if dense_cells is not None else len(space.lattice) * 2
    levels = " ".join(str(c) for c in space.lattice)
    question = "threshold" if setup.threshold else "crossover"
    lines = [
        f"search: {question} of {setup.variant} vs {BASELINE} on {setup.workload}, concurrency "
        f"{space.lattice[0]}..{space.lattice[-1]}",
        f"  lattice ({len(space.lattice)} levels): {levels}; coarse levels "
        f"{' '.join(str(c) for c in space.coarse)}; up to {space.max_repeats} repeat(s) of a "
        "level whose interval straddles 0",
        f"  budget: grid.search.max_cells={space.max_cells} (a dense grid of this lattice: "
        f"{dense} cells)",
        f"  step 1: {first.why} -> {len(first.points) * space.cells_per_point} cells (listed "
        "below); later steps follow from the committed cells",
    ]
    if setup.prior:
        shown = ", ".join(f"c={c} {v:+.0%}" for c, v in zip(space.lattice, setup.prior.predicted,
                                                              strict=True))
        lines.insert(3, f"  prior: {setup.prior.label} predicts the speedup {shown}")
    if setup.threshold:
        t = setup.threshold
        inside = [v for v in t.honoured if space.lattice[0] <= v <= space.lattice[-1]]
        lines.insert(3, f"  then: the {len(inside)} speculative_disable_above_batch values the "
                     f"engine tells apart in the range ({_span(inside)}) ranked by predicted "
                     f"regret; the top {t.candidates} confirmed where they differ "
                     f"({t.reserve} of the cells kept for it)")
    return lines


def _span(values: Sequence[int]) -> str:
    shown = " ".join(str(v) for v in values[:12])
    return shown + (f" ... {values[-1]}" if len(values) > 12 else "")

