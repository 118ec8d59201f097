"""What does a speculative step cost the node at each load and depth, and what does that make
of any drafter? (`grid.search.kind=speculation`, docs/surface.md): the relative step cost surface
c(B, k) from forced-acceptance cells over a rectangle of loads x depths refined only where the
measured cells disagree with the surface their neighbours give (steps.py, pure), and from it,
for a drafter's acceptance profile (`grid.search.profile`, else the run's own drafter in one
unforced cell), the predicted speedup, break-even accept length and best depth at every
(B, k) (predict.py). With `grid.search.surface=results/RUN` it measures nothing and predicts
from that run's surface (`plan=true` prints it before any server starts). Read: read.py;
report: report.py.

A cell is an ordinary cell: the baseline's at a load, else the grid's speculative variant
composed with `variant.args.speculative_num_steps=k` and `variant.forced_acceptance.length=L`
(or unforced) at `load.concurrency=B`: the id a dense grid of those factors gives."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from engines.forced import forced_acceptance, speculative_steps
from grid.analysis import Slo
from grid.analysis.surface import Profile, interpolated, read_profile
from grid.plan.cells import Cell
from grid.plan.search import (
    BASELINE,
    LENGTH_KEY,
    SearchError,
    check_one_against_baseline,
    search_space,
    with_settings,
)
from grid.plan.specs import launch_spec
from grid.plan.workloads import WorkloadPlan
from grid.questions import TRACE_FILE, Planned, Question
from grid.questions.speculation.keys import SpeculationKeys
from grid.questions.speculation.predict import (
    engine_forms,
    mean_acceptance,
    prediction_json,
    surface_json,
)
from grid.questions.speculation.read import Read, own_profile, rate_index, read_run
from grid.questions.speculation.report import (
    answer_sentence,
    prediction_lines,
    surface_decision,
    trace_lines,
    trace_section,
    write_surface_files,
)
from grid.questions.speculation.steps import (
    OWN,
    Point,
    SurfaceSpace,
    SurfaceStep,
    coarse_points,
    next_step,
    result,
    servers,
    steps_of,
)

STEPS_KEY = "variant.args.speculative_num_steps"
RATES_KEY = "variant.forced_acceptance.rates"
GIVEN = "given"
"""The stop of a search that predicts from an earlier run's surface (measures nothing)."""
OWN_KEYS = ("speculative_disable_above_batch", "speculative_depth", "speculative_adaptive")
"""Variant keys that vary the depth by batch: a surface cell drafts one depth."""


class SurfacePlanned(Planned):
    """A surface search planned for one run: its space and the cell of every point."""

    def __init__(self, space: SurfaceSpace, cells: Sequence[Cell], template: Cell,
                 profile: Profile | None, earlier: Path | None) -> None:
        self.space, self.max_cells, self.template = space, space.max_cells, template
        self.profile, self.earlier = profile, earlier
        self.points: dict[Point, Cell] = {point_of(c, space): c for c in cells}
        self.read = Read()
        self.run_dir: Path | None = None
        """The run folder `replay` last read (its own drafter's cells profile it)."""
        self.variant, self.workload = template.variant, template.workload

    @property
    def variant_cell(self) -> Cell:
        return self.template

    def describe(self, point: Sequence[int]) -> str:
        load, depth, rate = point
        if depth == 0:
            return f"c={load} {BASELINE}"
        if rate == OWN:
            return f"c={load} k={depth} own acceptance"
        return f"c={load} k={depth} length {self.space.length(depth, rate):g}"

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        """The points' cells, one server's together in ascending load: variant `first` first
        (its server may still run), then the baseline, then by depth and rate."""
        chosen = sorted((tuple(p) for p in points),
                        key=lambda p: (p[1] != 0, p[1], p[2] == OWN, p[2], p[0]))
        cells = [self.points[(p[0], p[1], p[2])] for p in chosen]
        return sorted(cells, key=lambda c: c.variant != first)

    def first_points(self) -> list[Any]:
        return [] if self.earlier is not None else coarse_points(self.space)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The steps from the committed cells' costs (read.py: the report's analysis)."""
        if self.earlier is not None:
            self.run_dir, self.read = self.earlier, read_run(self.earlier, slo, self.space.rates)
            return [SurfaceStep(1, f"the surface of {self.earlier}", (), 0, GIVEN)], set()
        self.run_dir = run_dir
        ids = {c.cell_id: p for p, c in self.points.items()}
        self.read = read_run(run_dir, slo, self.space.rates, ids)
        measured = {ids[i] for i in self.read.done}
        costs = {key: (c.value, *c.interval) for key, c in self.read.costs.items()}
        return list(steps_of(self.space, measured, costs)), measured

    def answers(self) -> dict[str, Any]:
        """The surface and the prediction from what `replay` read (search.json `result`):
        for the profile given, else the drafter's own cells in the run read."""
        profile = self.profile
        if profile is None and self.run_dir is not None:
            profile = own_profile(self.run_dir, self.read.table, str(self.run_dir))
        out = surface_json(self.read, self.space.lattice, self.space.depths,
                           mean_acceptance(profile))
        costs = interpolated(self.read.costs, self.space.lattice, self.space.depths)
        out["prediction"] = (None if profile is None or not costs else
                             prediction_json(costs, profile, engine_forms(self.template)))
        return out

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        space = self.space
        res = {**result(space, steps), "note": note, **self.answers()}
        if self.earlier is not None:
            res["from"] = str(self.earlier)
        return {"kind": "speculation", "baseline": BASELINE, "variant": self.variant,
                "workload": self.workload, "load_kind": "concurrency",
                "engine": str(self.template.config["engine"]["name"]),
                "lattice": list(space.lattice), "coarse": list(space.coarse),
                "depths": list(space.depths), "rates": list(space.rates),
                "result": res, "steps": [s.as_json() for s in steps]}

    def plan_lines(self) -> list[str]:
        """The question, the rectangle, the first step's cells and starts against the dense
        grid's, the starts' time; or, from an earlier surface, the prediction itself."""
        space = self.space
        head = (f"search: step cost surface of {self.variant} vs {BASELINE} on {self.workload} "
                f"(forced acceptance: performance only), concurrency {space.lattice[0]}.."
                f"{space.lattice[-1]} x depths {space.depths[0]}..{space.depths[-1]}")
        if self.earlier is not None:
            self.replay(self.earlier, Slo())
            answers = self.answers()
            if answers["prediction"] is None:
                return [head, f"  from {self.earlier}: no surface or no profile to predict "
                        "from (grid.search.profile)"]
            return [head, f"  from {self.earlier}: nothing is measured",
                    *prediction_lines(answers["prediction"])]
        first = next_step(space, set(), {})
        engine = self.template.config["engine"]
        start = engines.get(engine["name"]).start_seconds(engine.get("device") or "cuda")
        starts = servers(first.points)
        return [
            head,
            f"  lattice ({len(space.lattice)}): {' '.join(map(str, space.lattice))}; depths "
            f"{' '.join(map(str, space.depths))}; forced rates "
            f"{' '.join(f'{r:g}' for r in space.rates)} (each draft accepted with that "
            "probability: depth k forced to the rates a, a^2 .. a^k; the first the surface's, "
            "the rest the length check's)",
            f"  budget: grid.search.max_cells={space.max_cells} (the dense grid of these loads, "
            f"depths and rates with the baseline: {space.dense_cells} cells, "
            f"{space.dense_starts} server starts)",
            f"  step 1: {first.why} -> {len(first.points)} cells on {starts} servers, each "
            f"serving all its loads once (~{starts * start / 60:.1f} min of starts at "
            f"{start:g} s each); later: a new depth is one start at every load, a new load one "
            "start per depth and the baseline",
            *(["  profile: " + str(self.profile.source) + " (grid.search.profile)"]
              if self.profile is not None else []),
        ]


def point_of(cell: Cell, space: SurfaceSpace) -> Point:
    """A universe cell's point (load, depth, rate index)."""
    variant = cell.config["variant"]
    load = int(cell.concurrency or 0)
    if variant["name"] == BASELINE:
        return (load, 0, 0)
    depth = int(variant["args"]["speculative_num_steps"])
    forced = forced_acceptance(variant.get("forced_acceptance"), variant["args"])
    if forced is None:
        return (load, depth, OWN)
    rate = rate_index(forced.mean_length, depth, space.rates)
    assert rate is not None, f"{cell.describe()}: forced to no rate of {space.rates}"
    return (load, depth, rate)


def takes_rates(template: Cell) -> bool:
    """Whether the variant's engine forces per-position rates (the simulator, vLLM), or a mean
    length only (SGLang): its own refusal of a forced chain decides."""
    probe = with_settings(template, {STEPS_KEY: 1, RATES_KEY: [0.5]})
    try:
        launch_spec(probe.config, template.engine_version)
    except ValueError:
        return False
    return True


def surface_space(cfg: DictConfig) -> SurfaceSpace:
    """The lattice, depths, rates and budget; SearchError (one line) for depths that are not
    [0, d1, d2, ...] ascending with two speculative depths or more, rates outside (0, 1]."""
    s = cfg.grid.search
    base = search_space(cfg)
    depths = OmegaConf.to_container(s.depths, resolve=True)
    rates = OmegaConf.to_container(s.rates, resolve=True)
    if (not isinstance(depths, list) or len(depths) < 3 or depths[0] != 0
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
            or depths != sorted(set(depths))):
        raise SearchError("grid.search.depths must be ascending whole depths from 0 (the "
                          "baseline) with two speculative depths or more, e.g. [0, 1, 2, 3, 4, "
                          f"5, 6, 7]; got {depths}")
    if (not isinstance(rates, list) or not rates
            or not all(isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1
                       for r in rates) or len(set(rates)) != len(rates)):
        raise SearchError("grid.search.rates must be distinct forced acceptance rates in "
                          f"(0, 1] (the surface's first, the length check's after); got {rates}")
    return SurfaceSpace(base.lattice, base.coarse, tuple(depths[1:]),
                        tuple(float(r) for r in rates), base.max_cells, base.min_effect,
                        s.profile is None and s.surface is None)


def _earlier(path: str) -> tuple[Path, dict[str, Any]]:
    """An earlier surface search's folder and its trace; SearchError (one line) otherwise."""
    folder = Path(path).expanduser().resolve()
    try:
        trace = json.loads((folder / TRACE_FILE).read_text())
    except (OSError, ValueError):
        trace = None
    if not isinstance(trace, dict) or trace.get("kind") != "speculation":
        raise SearchError(f"grid.search.surface={path}: not a speculation run folder (no "
                          f"{TRACE_FILE} of kind speculation)")
    return folder, trace


def _profile(path: str | None) -> Profile | None:
    if path is None:
        return None
    try:
        return read_profile(Path(path).expanduser())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SearchError(f"grid.search.profile={path}: {e}") from None


class Surface(Question):
    kind = "speculation"
    lines = staticmethod(trace_lines)
    answer = staticmethod(answer_sentence)
    section = staticmethod(trace_section)
    decision = staticmethod(surface_decision)
    write_files = staticmethod(write_surface_files)

    def check(self, cfg: DictConfig) -> None:
        """The depths and rates, the profile file and the earlier run read (one line each)."""
        for axis in cfg.grid.axes:
            if str(axis).startswith("variant.forced_acceptance") or axis == STEPS_KEY:
                raise SearchError(f"grid.search.kind=speculation chooses the depths and forced "
                                  f"lengths itself (grid.search.depths, rates); drop the grid "
                                  f"axis {axis}")
        super().check(cfg)
        surface_space(cfg)
        _profile(cfg.grid.search.profile)
        if cfg.grid.search.surface is not None:
            _earlier(str(cfg.grid.search.surface))

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """The baseline's cells as they are; each of the speculative variant's once per depth
        and forced rate, and unforced at the deepest depth at the lowest load; the context:
        the space and the variant's own cell at the lowest load. SearchError for a grid that
        is not the baseline and one speculative variant on one workload, or a variant that
        sets the acceptance or the depth by batch itself."""
        check_one_against_baseline(cells, "speculation measures one speculative variant")
        own = [c for c in cells if c.config["variant"]["name"] != BASELINE]
        variant = own[0].config["variant"]
        if speculative_steps(variant.get("args") or {}) is None:
            raise SearchError(f"grid.search.kind=speculation: variant {variant['name']} does not "
                              "speculate: there is no step to cost")
        given = [k for k in OWN_KEYS if variant.get(k) not in (None, False)]
        if any(dict(variant.get("forced_acceptance") or {}).values()) or given:
            raise SearchError(f"grid.search.kind=speculation sets the forced acceptance and one "
                              f"depth itself; variant {variant['name']} already sets "
                              f"{given[0] if given else 'forced_acceptance'}")
        space = _space(cfg)
        template = min(own, key=lambda c: c.concurrency or 0)
        if cfg.grid.search.surface is not None:  # predicts only: nothing is measured
            return list(cells), (space, template)
        out = [c for c in cells if c.config["variant"]["name"] == BASELINE]
        chained = takes_rates(template)
        for cell in own:
            settings = [{STEPS_KEY: k, **({RATES_KEY: list(space.chain(k, r))} if chained else
                                          {LENGTH_KEY: space.length(k, r)})}
                        for k in space.depths for r in range(len(space.rates))]
            if space.profile and cell.concurrency == space.lattice[0]:
                settings.append({STEPS_KEY: space.depths[-1]})
            for setting in settings:
                twin = with_settings(cell, setting)
                if cell.cell_id in workloads.alignments:
                    workloads.alignments[twin.cell_id] = workloads.alignments[cell.cell_id]
                out.append(twin)
        return out, (space, template)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        space, template = context
        speculative = next(c for c in cells if c.config["variant"]["name"] != BASELINE)
        template = template.with_engine_version(speculative.engine_version)
        earlier = cfg.grid.search.surface
        return SurfacePlanned(space, cells, template, _profile(cfg.grid.search.profile),
                              None if earlier is None else _earlier(str(earlier))[0])


def _space(cfg: DictConfig) -> SurfaceSpace:
    """This run's space; from an earlier surface (grid.search.surface), that run's lattice,
    depths and rates (what its cells were measured at)."""
    space = surface_space(cfg)
    if cfg.grid.search.surface is None:
        return space
    _, trace = _earlier(str(cfg.grid.search.surface))
    return dataclasses.replace(space, lattice=tuple(trace["lattice"]),
                               coarse=tuple(trace["coarse"]), depths=tuple(trace["depths"]),
                               rates=tuple(trace["rates"]), profile=False)


QUESTION = Surface()
KEYS = SpeculationKeys
