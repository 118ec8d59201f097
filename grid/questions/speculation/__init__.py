"""How should I configure speculation on this server for my traffic? (`grid.search.kind=
speculation`, docs/questions.md): on or off at each batch size, how deep at each, and whether the
drafter pays. One model of the node, the relative step cost surface c(B, k) over a rectangle of
loads x depths, its points the drafter's own cells (c = L T_b / T_v at each cell's measured
accept length; forced cells with `grid.search.forced=true`), refined where a measured cell
disagrees with the surface its neighbours give or where the best depth changes (steps.py, pure);
one model of the drafter, its per-position acceptance profile (`grid.search.profile`: a file or a
run folder; else the run's own drafter, from its cells). Every answer is a view of the two,
computed once (predict.py, answers.py): the speedup and the break-even length at every (B, k)
with the drafter placed on it, the configured depth's crossover and threshold, the best depth per
load and the schedule. Then the drafter's own cells confirm the prediction where it decides
(confirm.py), and one recommendation in the engine's words leads the report (recommend.py,
report.py). With `grid.search.surface=results/RUN` it measures nothing and predicts from that
run's surface. Plan: plan.py; the planned question: planned.py; what it reads of a run: read.py.

A cell is an ordinary cell: the baseline's at a load, else the grid's speculative variant composed
with `variant.args.speculative_num_steps=k` and `variant.forced_acceptance.length=L` (or unforced)
at `load.concurrency=B`: the id a dense grid of those factors gives."""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig

from engines.forced import speculative_steps
from grid.plan.cells import Cell
from grid.plan.search import (
    BASELINE,
    LENGTH_KEY,
    SearchError,
    check_one_against_baseline,
    with_settings,
)
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.speculation.keys import SpeculationKeys
from grid.questions.speculation.plan import (
    DRAFT_KEY,
    RATES_KEY,
    STEPS_KEY,
    earlier_run,
    given_profile,
    planned_space,
    point_of,
    surface_space,
    switch_settings,
    takes_rates,
    takes_zero,
)
from grid.questions.speculation.planned import SpeculationPlanned
from grid.questions.speculation.report import (
    answer_sentence,
    speculation_decision,
    trace_lines,
    trace_section,
    write_settings,
)
from grid.questions.speculation.steps import OWN, SurfaceSpace

OWN_KEYS = ("speculative_disable_above_batch", "speculative_depth", "speculative_adaptive")
"""Variant keys that vary the depth by batch: a surface cell drafts one depth."""


class Speculation(Question):
    kind = "speculation"
    lines = staticmethod(trace_lines)
    answer = staticmethod(answer_sentence)
    section = staticmethod(trace_section)
    decision = staticmethod(speculation_decision)
    write_files = staticmethod(write_settings)

    def recommendations(self, recs: list[dict], trace: dict) -> list[dict]:
        """One recommendation: where the question has its own, the dense rule's over the same
        run's cells (its own drafter's confirming cells at a few loads) gives none beside it."""
        return [] if trace["result"].get("recommendations") else recs

    def check(self, cfg: DictConfig) -> None:
        """The depths and rates, the profile file and the earlier run read (one line each)."""
        for axis in cfg.grid.axes:
            if str(axis).startswith("variant.forced_acceptance") or axis == STEPS_KEY:
                raise SearchError(f"grid.search.kind=speculation chooses the depths and forced "
                                  f"lengths itself (grid.search.depths, rates); drop the grid "
                                  f"axis {axis}")
        super().check(cfg)
        surface_space(cfg)
        effect = cfg.grid.search.min_effect
        if not isinstance(effect, int | float) or not 0 <= effect <= 1:
            raise SearchError(f"grid.search.min_effect must be within [0, 1], got {effect}")
        confirm = cfg.grid.search.confirm_cells
        if not isinstance(confirm, int) or confirm < 0:
            raise SearchError(f"grid.search.confirm_cells must be >= 0, got {confirm}")
        spread = cfg.grid.search.repeat_spread
        if spread is not None and (not isinstance(spread, int | float) or isinstance(
                spread, bool) or not 0 <= spread < 1):
            raise SearchError(f"grid.search.repeat_spread must be a relative spread within "
                              f"[0, 1) (0.06: 6 % between repeats) or null, got {spread}")
        given_profile(cfg.grid.search.profile)
        if cfg.grid.search.surface is not None:
            earlier_run(str(cfg.grid.search.surface))

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """The baseline's cells as they are; each of the speculative variant's unforced at
        every depth (the surface's points by default, its profile, the confirmation), at depth 0
        where its engine runs it, with each of `grid.search.drafters` at every depth, and, with
        `grid.search.forced`, once per depth and forced rate; the context:
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
        space = planned_space(cfg)
        template = min(own, key=lambda c: c.concurrency or 0)
        if cfg.grid.search.surface is not None:  # predicts only: nothing is measured
            return list(cells), (space, template)
        out = [c for c in cells if c.config["variant"]["name"] == BASELINE]
        space = dataclasses.replace(space, zero=takes_zero(template))
        chained = space.forced and takes_rates(template)
        for cell in own:
            settings = [{STEPS_KEY: k, **({RATES_KEY: list(space.chain(k, r))} if chained else
                                          {LENGTH_KEY: space.length(k, r)})}
                        for k in space.depths for r in range(len(space.rates)) if space.forced]
            if space.profile or not space.forced:  # the drafter's own cells: the surface's
                # points (unforced), its profile, the confirmation
                settings += [{STEPS_KEY: k} for k in space.depths]
            # depth 0 where the engine runs it (speculation configured, no drafts)
            settings += [{STEPS_KEY: 0}] if space.zero else []
            settings += [{STEPS_KEY: k, DRAFT_KEY: d} for d in space.drafters
                         for k in space.depths]  # the other drafters, unforced
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
        return SpeculationPlanned(space, [*cells, *switched_cells(space, cells, template)],
                                  template,
                                  given_profile(cfg.grid.search.profile),
                                  None if earlier is None else earlier_run(str(earlier))[0],
                                  int(cfg.grid.search.confirm_cells),
                                  _spread(cfg.grid.search.repeat_spread))


def switched_cells(space: SurfaceSpace, cells: list[Cell], template: Cell) -> list[Cell]:
    """The threshold's confirmation's cells (confirm.py `switch_loads`): the drafter's own at
    the configured depth (the deepest where it is not searched) with each threshold applied
    that the engine takes, at the load at it and the one above. Not among the run's planned
    cells: a step that chooses them plans them then (grid/execute/search.py `plan_step`), so
    the plan and its warnings hold only cells the search may run without a threshold."""
    if not space.profile:
        return []
    depth = int(template.config["variant"]["args"]["speculative_num_steps"])
    depth = depth if depth in space.depths else space.depths[-1]
    settings = switch_settings(template, space.lattice, depth)
    own = {point_of(c, space)[0]: c for c in cells if point_of(c, space)[1:] == (depth, OWN)}
    return [with_settings(own[b], setting) for b, found in sorted(settings.items())
            if b in own for setting in found]


def _spread(value: Any) -> float | None:
    return None if value is None else float(value)


QUESTION = Speculation()
KEYS = SpeculationKeys
