"""Which speculative depth at which load? (`grid.search.kind=depth`, docs/search.md)."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from grid.analysis import Slo
from grid.analysis.depth import Schedule, schedule
from grid.plan import search
from grid.plan.cells import Cell
from grid.plan.specs import server_request
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question
from grid.questions.depth import confirm, report
from grid.questions.depth.confirm import ADAPTIVE, SCHEDULE, THRESHOLD, replay_all
from grid.questions.depth.steps import DepthPoint, DepthSpace, DepthStep, depth_result, prior_depths
from grid.questions.measure import point_throughputs
from grid.questions.steps import first_step_line

BASELINE = search.BASELINE
STEPS_ARG = "speculative_num_steps"
STEPS_KEY = f"variant.args.{STEPS_ARG}"
"""The factor that makes a depth cell."""
OWN_KEYS = ("speculative_disable_above_batch", "speculative_depth", "speculative_adaptive")
"""Variant keys the depth search sets itself."""


def depth_space(cfg: DictConfig) -> DepthSpace:
    """The lattice, budget and depths; SearchError unless depths are `[0, d1, ...]` ascending."""
    space = search.search_space(cfg)
    raw = OmegaConf.to_container(cfg.grid.search.depths, resolve=True)
    depths = list(raw) if isinstance(raw, list) else []
    if (not all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
            or len(depths) < 2 or depths[0] != 0 or depths != sorted(set(depths))):
        raise search.SearchError("grid.search.depths must be ascending whole depths from 0 "
                                 "(the baseline), with at least one speculative depth, e.g. "
                                 f"[0, 1, 3, 5]; got {depths}")
    return DepthSpace(space.lattice, space.coarse, tuple(depths), space.max_cells,
                      space.max_repeats, space.min_effect)


class DepthPlanned(Planned):
    """A depth search planned for one run; SearchError for a variant it cannot schedule."""

    def __init__(self, space: DepthSpace, points: dict[DepthPoint, Cell], template: Cell,
                 confirm_cells: int) -> None:
        self.space, self.points, self.confirm_cells = space, points, confirm_cells
        self.max_cells = space.max_cells
        self.template = template
        """The variant's cell at the lowest load, which the confirmation's are made from."""
        variant = template.config["variant"]
        given = [k for k in OWN_KEYS if variant.get(k) not in (None, False)]
        if given:
            raise search.SearchError(f"grid.search.kind=depth sets {given[0]} itself; variant "
                                     f"{variant['name']} already sets it")
        self.engine = str(template.config["engine"]["name"])
        kind = engines.get(self.engine)
        self.adaptive = kind.adaptive_refusal(variant) is None
        """The engine adapts the depth at run time (an alternative the confirmation runs)."""
        self.schedule: Schedule | None = None
        """The schedule the last replay found (it names the confirmation's cells)."""
        self.threshold: Schedule | None = None
        """Its threshold schedule, if any."""
        self.prior: tuple[str, str, dict[int, tuple[float, ...]]] | None = None
        """(the twin's file, its label, each positive depth's speedup per level): the prior."""
        try:
            ok = self.setting(((1, max(space.depths)),)) is not None
        except ValueError as e:
            raise search.SearchError(f"grid.search.kind=depth: variant {variant['name']} on "
                                     f"{kind.label}: {e}") from None
        if not ok:
            raise search.SearchError(f"grid.search.kind=depth: {kind.label} cannot set the "
                                     "speculative depth by batch size")

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(p for p in self.points if p[1] > 0)]

    describe = staticmethod(confirm.describe)

    def cell(self, point: Sequence[int]) -> Cell:
        """A depth point's cell from the plan, a confirmation point's made here."""
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
        return search.with_settings(self.template, settings)

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        cells = [self.cell(p) for p in sorted(tuple(p) for p in points)]
        order = {c.variant: i for i, c in enumerate(
            sorted(cells, key=lambda c: (c.variant != first, c.variant != BASELINE)))}
        return sorted(cells, key=lambda c: (order[c.variant], c.concurrency or 0))

    def first_points(self) -> list[Any]:
        return list(replay_all(self.space, self.confirm_cells, self.adaptive, {})[0].points)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The search replayed; once it stops, again with the confirmation's cells it names."""
        measured = point_throughputs(run_dir, self.points, slo)
        steps = replay_all(self.space, self.confirm_cells, self.adaptive, measured)
        searched = [s for s in steps if isinstance(s, DepthStep)]
        if searched[-1].stop is None:
            return list(steps), set(measured)
        levels, lattice = searched[-1].levels, self.space.lattice
        self.schedule = schedule(levels)
        self.threshold = confirm.threshold_schedule(self.schedule, lattice)
        loads = {load for _, _, load in confirm.confirm_loads(self.schedule, levels, lattice)}
        servers = [SCHEDULE] + ([THRESHOLD] if self.threshold else []) + (
            [ADAPTIVE] if self.adaptive else [])
        extra = {(c, s, r): self.cell((c, s, r)) for c in loads for s in servers
                 for r in range(self.space.max_repeats)}
        measured.update(point_throughputs(run_dir, extra, slo))
        steps = replay_all(self.space, self.confirm_cells, self.adaptive, measured)
        return list(steps), set(measured)

    def setting(self, tiers: Schedule) -> dict[str, Any] | None:
        """The schedule in the engine's words (Engine.depth_setting)."""
        cell = search.with_settings(self.template,
                                    {"variant.speculative_depth": [list(t) for t in tiers]})
        setting = engines.get(self.engine).depth_setting(server_request(cell.config))
        if setting is None:
            return None
        return {"engine": setting.engine, "flags": list(setting.flags),
                "command": " ".join(shlex.quote(f) for f in setting.flags),
                "files": dict(setting.files), "tiers": [list(t) for t in setting.tiers]}

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        """search.json, with the schedule in the engine's words (what to paste)."""
        searched = [s for s in steps if isinstance(s, DepthStep)]
        result = {**depth_result(self.space, searched), **confirm.confirm_result(steps),
                  "note": note, "confirm_cells": self.confirm_cells}
        tiers = schedule(searched[-1].levels)
        result["setting"] = self.setting(tiers) if tiers and max(d for _, d in tiers) > 0 else None
        head = {"kind": "depth", "baseline": BASELINE, "variant": self.template.variant,
                "workload": self.template.workload, "load_kind": "concurrency",
                "depths": list(self.space.depths), "engine": self.engine,
                "adaptive": self.adaptive, "confirm_cells": self.confirm_cells}
        if self.prior:
            path, label, speedups = self.prior
            head["prior"] = {"path": path, "source": label,
                             "predicted_speedup": {str(d): [round(v, 4) for v in values]
                                                   for d, values in speedups.items()},
                             "predicted_best": [list(p) for p in self.space.prior]}
        return {**head, "result": result, "steps": [s.as_json() for s in steps]}

    def stop_line(self, steps: Sequence[Any]) -> str:
        """The schedule, and whether it stands."""
        tiers = schedule([s for s in steps if isinstance(s, DepthStep)][-1].levels)
        text = ", ".join(f"depth {d} from batch {b}" for b, d in tiers) or "none"
        last = steps[-1]
        if isinstance(last, confirm.ScheduleConfirmStep) and last.checks:
            standing = sum(t.stands for t in last.checks)
            text += f" ({standing} of {len(last.checks)} tier(s) confirmed: {last.stop})"
        return f"; schedule: {text}"

    def with_prior(self, path: str | None, workloads: WorkloadPlan) -> DepthPlanned:
        """A twin asked first (grid.search.prior) for every positive depth's speedup."""
        if path is None:
            return self
        space, low = self.space, self.space.lattice[0]
        speedups: dict[int, tuple[float, ...]] = {}
        file, label = None, ""
        for depth in space.depths[1:]:
            file, label, speedups[depth] = search.ask_twin(
                path, self.points[(low, 0, 0)], self.points[(low, depth, 0)], space.lattice,
                workloads)
        best = prior_depths(space.depths, space.lattice, speedups)
        self.space = dataclasses.replace(space, prior=best)
        self.prior = (str(file), label, speedups)
        return self

    def plan_lines(self) -> list[str]:
        space = self.space
        first = replay_all(space, self.confirm_cells, self.adaptive, {})[0]
        alternatives = ("the baseline, the best single depth, the threshold schedule (that "
                        "depth, off where the schedule turns speculation off)") + (
            " and the engine's own adaptation" if self.adaptive else "")
        return [
            f"search: depth of {self.template.variant} by load on {self.template.workload}: "
            f"depths {' '.join(str(d) for d in space.depths)} (0 = {BASELINE}), concurrency "
            f"{space.lattice[0]}..{space.lattice[-1]}",
            f"  lattice ({len(space.lattice)} levels): {' '.join(map(str, space.lattice))}; "
            f"coarse levels {' '.join(map(str, space.coarse))}",
            f"  budget: grid.search.max_cells={space.max_cells} (a dense grid of these levels "
            f"and depths: {len(space.lattice) * len(space.depths)} cells), then up to "
            f"grid.search.confirm_cells={self.confirm_cells} confirming the schedule against "
            f"{alternatives}",
            *([f"  prior: {self.prior[1]} predicts the best depth "
               + ", ".join(f"c={c} {d}" for c, d in space.prior)] if self.prior else []),
            first_step_line(first.why, len(first.points)),
        ]


class Depth(Question):
    kind = "depth"
    lines = staticmethod(report.depth_lines)
    section = staticmethod(report.depth_section)
    answer = staticmethod(report.answer_sentence)

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """The baseline's cells and the variant's per positive depth; context: space, template."""
        space = depth_space(cfg)
        search.check_one_against_baseline(cells, "depth compares one speculative variant's "
                                          "depths")
        own = [c for c in cells if c.config["variant"]["name"] != BASELINE]
        out = search.with_twins(cells, workloads, STEPS_KEY, [d for d in space.depths if d],
                                keep=lambda c: c.config["variant"]["name"] == BASELINE)
        return search.with_repeats(out, workloads, search.search_space(cfg)), (
            space, min(own, key=lambda c: c.concurrency or 0))

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        space, template = context
        points: dict[DepthPoint, Cell] = {}
        for cell in cells:
            variant = cell.config["variant"]
            depth = 0 if variant["name"] == BASELINE else int(variant["args"][STEPS_ARG])
            points[(int(cell.concurrency or 0), depth, int(cell.config["load"]["repeat"]))] = \
                cell
        speculative = next(c for c in cells if c.config["variant"]["name"] != BASELINE)
        template = template.with_engine_version(speculative.engine_version)  # as the plan's
        planned = DepthPlanned(space, points, template, int(cfg.grid.search.confirm_cells))
        return planned.with_prior(cfg.grid.search.prior, workloads)

    def decision(self, trace: dict) -> dict:
        return {"depth": report.depth_decision(trace)}

    def write_files(self, run_dir: Path, trace: dict) -> None:
        report.write_depth_files(run_dir, trace)


QUESTION = Depth()
