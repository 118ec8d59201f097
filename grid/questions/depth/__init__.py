"""Which speculative depth at which load? (`grid.search.kind=depth`, docs/search.md): the plan,
and the answer in the report in the engine's words."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from grid.analysis import Slo
from grid.analysis.depth import Schedule, schedule
from grid.plan import search
from grid.plan.cells import Cell
from grid.plan.search import BASELINE, SearchError
from grid.plan.specs import server_request
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question, html_section
from grid.questions.depth import confirm
from grid.questions.depth.confirm import ADAPTIVE, SCHEDULE, THRESHOLD, describe, replay_all
from grid.questions.depth.steps import DepthPoint, DepthSpace, DepthStep, depth_result, prior_depths
from grid.questions.measure import point_throughputs
from grid.questions.steps import first_step_line, step_lines, unfinished
from grid.store.artifacts import write_file

STEPS_ARG = "speculative_num_steps"
STEPS_KEY = f"variant.args.{STEPS_ARG}"
"""The factor that makes a depth cell."""
OWN_KEYS = ("speculative_disable_above_batch", "speculative_depth", "speculative_adaptive")
"""Variant keys the depth search sets itself."""
FOLDER = "depth-schedule"
"""Where the settings go in the run folder."""


def depth_space(cfg: DictConfig) -> DepthSpace:
    """The lattice, budget and depths; SearchError unless depths are `[0, d1, ...]` ascending."""
    space = search.search_space(cfg)
    raw = OmegaConf.to_container(cfg.grid.search.depths, resolve=True)
    depths = list(raw) if isinstance(raw, list) else []
    if (not all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
            or len(depths) < 2 or depths[0] != 0 or depths != sorted(set(depths))):
        raise SearchError("grid.search.depths must be ascending whole depths from 0 (the "
                          "baseline), with at least one speculative depth, e.g. [0, 1, 3, 5]; "
                          f"got {depths}")
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
            raise SearchError(f"grid.search.kind=depth sets {given[0]} itself; variant "
                              f"{variant['name']} already sets it")
        self.engine = str(template.config["engine"]["name"])
        kind = engines.get(self.engine)
        self.adaptive = kind.adaptive_refusal(variant) is None
        """The engine adapts the depth at run time (an alternative the confirmation runs)."""
        self.schedule: Schedule | None = None
        """The schedule the last replay found, and its threshold schedule: they name the
        confirmation's cells."""
        self.threshold: Schedule | None = None
        self.prior: tuple[str, str, dict[int, tuple[float, ...]]] | None = None
        """(the twin's file, its label, each positive depth's speedup per level): the prior."""
        try:
            ok = self.setting(((1, max(space.depths)),)) is not None
        except ValueError as e:
            raise SearchError(f"grid.search.kind=depth: variant {variant['name']} on "
                              f"{kind.label}: {e}") from None
        if not ok:
            raise SearchError(f"grid.search.kind=depth: {kind.label} cannot set the "
                              "speculative depth by batch size")

    @property
    def variant_cell(self) -> Cell:
        return self.points[min(p for p in self.points if p[1] > 0)]

    describe = staticmethod(describe)

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

    def steps(self, measured: dict) -> list[Any]:
        return list(replay_all(self.space, self.confirm_cells, self.adaptive, measured))

    def first_points(self) -> list[Any]:
        return list(self.steps({})[0].points)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The search replayed; once it stops, again with the confirmation's cells it names."""
        measured = point_throughputs(run_dir, self.points, slo)
        steps = self.steps(measured)
        searched = [s for s in steps if isinstance(s, DepthStep)]
        if searched[-1].stop is None:
            return steps, set(measured)
        levels, lattice = searched[-1].levels, self.space.lattice
        self.schedule = schedule(levels)
        self.threshold = confirm.threshold_schedule(self.schedule, lattice)
        loads = {load for _, _, load in confirm.confirm_loads(self.schedule, levels, lattice)}
        servers = [SCHEDULE] + ([THRESHOLD] if self.threshold else []) + (
            [ADAPTIVE] if self.adaptive else [])
        extra = {(c, s, r): self.cell((c, s, r)) for c in loads for s in servers
                 for r in range(self.space.max_repeats)}
        measured.update(point_throughputs(run_dir, extra, slo))
        return self.steps(measured), set(measured)

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
        self.space = dataclasses.replace(
            space, prior=prior_depths(space.depths, space.lattice, speedups))
        self.prior = (str(file), label, speedups)
        return self

    def plan_lines(self) -> list[str]:
        space, first = self.space, self.steps({})[0]
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


# --------------------------------------------------------------------------- the report
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _interval(entry: dict) -> str:
    lo, hi = entry.get("interval") or (None, None)
    return f"{_pct(entry.get('speedup'))} [{_pct(lo)}, {_pct(hi)}]"


def _depth(d: int | None) -> str:
    return "baseline" if d == 0 else f"depth {d}"


def schedule_text(tiers: list) -> str:
    return ", ".join(f"{_depth(d)} from batch {b}" for b, d in tiers) or "none"


def depth_lines(trace: dict) -> list[str]:
    """The steps, the stop, the schedule, its evidence and confirmation, the setting."""
    res = trace["result"]
    lines = [f"search: depth of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']}, depths {' '.join(str(d) for d in res['depths'])}, "
             f"c={res['lattice'][0]}..{res['lattice'][-1]}: {res['cells']} cells (max_cells "
             f"{res['max_cells']} + confirm_cells {res.get('confirm_cells')}; a dense grid: "
             f"{len(res['lattice']) * len(res['depths'])})",
             *step_lines(trace["steps"], describe, phases=True)]
    if not res.get("stop"):
        return [*lines, unfinished(res)]
    lines += [f"  stopped: {res['stop']} ({res['stop_meaning']}); schedule: "
              f"{schedule_text(res['schedule'])}; best single depth "
              f"{res.get('best_single_depth')}",
              "  evidence (best over runner-up, 95 % interval):"]
    for lv in res.get("levels", []):  # each decided level's best depth against the runner-up
        if lv.get("best") is not None:
            over = "" if lv.get("runner") is None else (
                f" over {_depth(lv['runner'])} {_interval(lv)} ({lv['sign']}, "
                f"{lv['repeats']} repeat(s))")
            lines.append(f"    c={lv['load']}: {_depth(lv['best'])}{over} among "
                         f"{{{', '.join(str(d) for d in lv['candidates'])}}}")
    if res.get("confirm_stop"):
        verdict = "stands" if res.get("stands") else "does not stand everywhere"
        lines.append(f"  confirmation ({res['confirm_stop']}: {res['confirm_stop_meaning']}): "
                     f"the schedule {verdict} (schedule over each alternative, 95 % interval):")
        if res.get("threshold_schedule"):
            lines.append("    threshold = the best single depth, off where the schedule turns "
                         f"speculation off: {schedule_text(res['threshold_schedule'])}")
        for tier in res.get("tiers", []):
            vs = "; ".join(f"vs {c['against']} {_interval(c) if 'speedup' in c else ''} "
                           f"{c['verdict']}".replace("  ", " ") for c in tier["comparisons"])
            lines.append(f"    from batch {tier['from']} ({_depth(tier['depth'])}), at "
                         f"c={tier['load']}: {'stands' if tier['stands'] else 'does not stand'}"
                         f": {vs}")
    setting = res.get("setting")
    if not setting:
        return [*lines, "  setting: none (the schedule never drafts: serve the baseline)"]
    routed = ", ".join(f"{lo}{'+' if hi is None else ('' if hi == lo else f'-{hi}')}: {d}"
                       for lo, hi, d in setting["tiers"])
    return [*lines, f"  set on {setting['engine']}: {setting['command']}",
            *(f"    with {name} (written to {FOLDER}/{name})" for name in setting.get("files", {})),
            f"    depth by running batch as the engine routes it: {routed}"]


def depth_section(trace: dict) -> str:
    """The HTML section: the same lines, the setting as code."""
    setting = trace["result"].get("setting") or {}
    files = "".join(f"<p>{escape(name)} ({FOLDER}/{escape(name)}):</p><pre>{escape(text)}</pre>"
                    for name, text in setting.get("files", {}).items())
    paste = (f"<p>Set it on {escape(setting['engine'])}:</p><pre>"
             f"{escape(setting['command'])}</pre>{files}" if setting else "")
    return html_section(depth_lines(trace), "Speculative depth by load", paste)


def depth_decision(trace: dict) -> dict:
    """decision.json's `depth`: the schedule, its evidence and confirmation, the setting."""
    res = trace["result"]
    return {"schedule": res.get("schedule"), "stop": res.get("stop"),
            "best_single_depth": res.get("best_single_depth"),
            "threshold_schedule": res.get("threshold_schedule"),
            "levels": res.get("levels"), "confirmation": res.get("tiers"),
            "confirm_stop": res.get("confirm_stop"), "stands": res.get("stands"),
            "setting": res.get("setting"), "files_in": FOLDER}


def write_depth_files(run_dir: Path, trace: dict) -> list[Path]:
    """The setting's files (SGLang's adaptive config) and its flags, beside the report."""
    setting = trace["result"].get("setting")
    if not setting:
        return []
    out = [write_file(run_dir, f"{FOLDER}/{name}", text)
           for name, text in setting.get("files", {}).items()]
    return [*out, write_file(run_dir, f"{FOLDER}/flags.txt", setting["command"] + "\n")]


class Depth(Question):
    kind = "depth"
    lines = staticmethod(depth_lines)
    section = staticmethod(depth_section)

    def answer(self, trace: dict) -> str | None:
        res = trace["result"]
        if not res.get("stop"):
            return None
        return (f"{trace['variant']} on {trace['workload']}: run the depth schedule "
                f"{schedule_text(res.get('schedule') or [])} (the depth search's choice after "
                f"{res['cells']} cells: {res['stop']})")

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
        return {"depth": depth_decision(trace)}

    def write_files(self, run_dir: Path, trace: dict) -> None:
        write_depth_files(run_dir, trace)


QUESTION = Depth()
