"""The speculation question planned for one run: the surface's steps (steps.py), then the
confirmation on the drafter's own cells (confirm.py), replayed from the committed cells; the
trace with the surface, the prediction, the confirmation and the one recommendation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import engines
from grid.analysis import Slo
from grid.analysis.bootstrap import interval
from grid.analysis.surface import Profile, best_depths, interpolated, predict, widened
from grid.analysis.verdict import between_runs
from grid.plan.cells import Cell
from grid.plan.search import BASELINE
from grid.questions import Planned
from grid.questions.measure import point_throughputs
from grid.questions.speculation.confirm import (
    CONFIRM_STOPS,
    CONFIRMED,
    CONTRADICTED,
    ConfirmStep,
    Est,
    confirm_steps,
    crossover_neighbours,
    rechosen,
    settle,
    single_cells,
    single_status,
    switch_loads,
    switch_point,
    switch_steps,
    switch_verdict,
    switched,
    targets,
)
from grid.questions.speculation.plan import point_of
from grid.questions.speculation.predict import (
    engine_forms,
    mean_acceptance,
    prediction_json,
    surface_json,
    zero_json,
    zero_speedups,
)
from grid.questions.speculation.read import Read, own_profile, read_run
from grid.questions.speculation.recommend import recommendation, threshold_part
from grid.questions.speculation.report import plan_lines
from grid.questions.speculation.steps import (
    OWN,
    BestOf,
    Point,
    SurfaceSpace,
    SurfaceStep,
    coarse_points,
    drafter_name,
    is_rung,
    result,
    steps_of,
)

GIVEN = "given"
"""The stop of a question that predicts from an earlier run's surface (measures nothing)."""


class SpeculationPlanned(Planned):
    """The question planned for one run: its space and the cell of every point."""

    def __init__(self, space: SurfaceSpace, cells: Sequence[Cell], template: Cell,
                 profile: Profile | None, earlier: Path | None, confirm_cells: int,
                 spread: float | None) -> None:
        self.space, self.max_cells, self.template = space, space.max_cells, template
        self.profile, self.earlier, self.confirm_cells = profile, earlier, confirm_cells
        self.points: dict[Point, Cell] = {point_of(c, space): c for c in cells}
        self.read = Read()
        self.run_dir: Path | None = None
        """The run folder `replay` last read (its own drafter's cells profile it)."""
        self.variant, self.workload = template.variant, template.workload
        self.depth = int(template.config["variant"]["args"]["speculative_num_steps"])
        """The configured depth (the crossover and threshold are its)."""
        self.profiled: set[str] | None = None
        """The drafter's own cells the surface measured: its profile (the confirmation's
        cells confirm, they do not move the prediction they confirm)."""
        self.own: dict[tuple[int, int], Est] = {}
        """The drafter's own cells' speedups over the baseline, by (load, depth)."""
        self.fitted: set[tuple[int, int]] | None = None
        """The (load, depth)s the surface's steps measured at its rate: its fitted points (the
        confirmation's cells are points of the surface too, reported, not fitted); None: every
        one read (an earlier run's surface)."""
        self.confirming: set[tuple[int, int]] = set()
        """The (load, depth)s of the drafter's own cells the confirmation chose."""
        self.spread = spread
        """The stated spread between repeats (grid.search.repeat_spread); None: none."""
        self.switched: dict[tuple[int, int], Est] = {}
        """The switched server's speedups over the baseline, by (load, threshold)."""
        self.switch: dict[str, Any] | None = None
        """The threshold's confirmation with the switch applied (confirm.py
        `switch_verdict`), once measured."""

    @property
    def variant_cell(self) -> Cell:
        return self.template

    def describe(self, point: Sequence[int]) -> str:
        load, depth, rate = point
        if depth == 0:
            return f"c={load} k=0 no drafts" if rate == OWN else f"c={load} {BASELINE}"
        if switched(rate) is not None:
            return f"c={load} k={depth} speculative_disable_above_batch={switched(rate)}"
        if rate == OWN:
            return f"c={load} k={depth} own acceptance"
        if rate < OWN:
            return f"c={load} k={depth} drafter {drafter_name(self.space, rate)}"
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
        """The surface's steps from the committed cells' costs (read.py: the report's
        analysis), then, once it stops, the confirmation's."""
        if self.earlier is not None:
            self.run_dir = self.earlier
            self.read = read_run(self.earlier, slo, self.space.rates, rate=self.space.rate)
            return [SurfaceStep(1, f"the surface of {self.earlier}", (), 0, GIVEN)], set()
        self.run_dir = run_dir
        ids = {c.cell_id: p for p, c in self.points.items()}
        self.read = read_run(run_dir, slo, self.space.rates, ids, self.space.rate,
                             {i: p[2] for i, p in ids.items() if is_rung(p[2])})
        measured = {ids[i] for i in self.read.done}
        costs = {key: (c.value, *c.interval) for key, c in self.read.costs.items()}
        steps: list[Any] = list(steps_of(self.space, measured, costs,
                                         self._best_of(run_dir, measured)))
        chosen = {p for s in steps for p in s.points}
        self.fitted = {(b, k) for b, k, r in chosen if k > 0 and r == self.space.rate}
        if steps[-1].stop is None or not self.space.profile:
            return steps, measured
        self.profiled = {self.points[p].cell_id for p in chosen if p[2] == OWN and p[1] > 0}
        self.own = self._own_speedups(run_dir, slo)
        self.switched = {(b, t): e for (b, _, r), e in self._speedups(run_dir, slo, {
            p: c for p, c in self.points.items() if switched(p[2]) is not None}).items()
            if (t := switched(r)) is not None}
        self.switch = None
        confirmation = self._confirmation(steps, len(chosen), measured, chosen)
        self.confirming = {(b, k) for s in confirmation for b, k, r in s.points if r == OWN} - {
            (b, k) for b, k, r in chosen if r == OWN}
        return [*steps, *confirmation], measured

    def _best_of(self, run_dir: Path, measured: set[Point]) -> BestOf | None:
        """The best depth per load a surface of measured (load, depth)s predicts for the
        profile given, else the drafter's own from the first step's own cells (all done);
        None without one."""
        profile = self.profile
        first = {p for p in coarse_points(self.space) if p[2] == OWN and p[1] > 0}
        if profile is None and first and first <= measured and self.read.table is not None:
            ids = {self.points[p].cell_id for p in first}
            profile = own_profile(run_dir, self.read.table[self.read.table.cell_id.isin(ids)],
                                  str(run_dir))
        if profile is None or not profile.domains:
            return None
        domain = next(iter(profile.domains.values()))
        every = self.read.costs

        def best_of(keys: set[tuple[int, int]]) -> dict[int, int]:
            costs = interpolated({k: c for k, c in every.items() if k in keys},
                                 self.space.lattice, self.space.depths)
            return best_depths(predict(costs, domain))
        return best_of

    def _own_speedups(self, run_dir: Path, slo: Slo) -> dict[tuple[int, int], Est]:
        """Each done own cell's speedup over the baseline at its load, 95 % (replicates
        paired by index)."""
        own = {p: c for p, c in self.points.items() if p[2] == OWN and p[1] > 0}
        out = {}
        for (b, k, _), (value, lo, hi) in self._speedups(run_dir, slo, own).items():
            out[(b, k)] = (value, *between_runs(value, lo, hi, self.spread))
        return out

    def _speedups(self, run_dir: Path, slo: Slo, points: dict[Point, Cell]
                  ) -> dict[Point, Est]:
        """Each done point's speedup over the baseline at its load, 95 % within-run (the
        replicates paired by index)."""
        out = {}
        for p, t in point_throughputs(run_dir, points, slo).items():
            base = self.read.baselines.get(p[0])
            if base is not None:
                out[p] = (t.value / base.value, *interval(t.reps / base.reps))
        return out

    def _domain(self) -> tuple[str, dict[str, Any]] | None:
        prediction = self.answers()["prediction"]
        if not prediction or not prediction["domains"]:
            return None
        return next(iter(prediction["domains"].items()))

    def _confirmation(self, steps: Sequence[Any], cells: int, measured: set[Point],
                      chosen: set[Point]) -> list[ConfirmStep]:
        found = self._domain()
        if found is None:
            return []
        _, dom = found
        cross = dom["crossover"] or {}
        near = crossover_neighbours(cross.get("crossover"), self.space.lattice)
        depth = self.depth if self.depth in self.space.depths else self.space.depths[-1]
        tiers = tuple((int(b), int(k)) for b, k in dom["schedule"])
        wanted = list(dict.fromkeys(targets(tiers, near, depth, self.space.lattice)
                                    + single_cells(dom.get("single"))))
        # A confirming cell measures the drafter at its own length, which the length checks'
        # widening allows for: it is compared with the fit's own interval (before widening).
        predicted = {(c["load"], c["depth"]): (c["speedup"], *c.get("fit_interval",
                                                                    c["interval"]))
                     for c in dom["cells"] if c["speedup"] is not None}
        decided = {int(b): int(k) for b, k in dom["best"].items()}
        out = confirm_steps(len(steps) + 1, cells, wanted, self.own, predicted,
                            self.space.coarse_depths, self.confirm_cells, decided,
                            {b for b, k, r in chosen if k == 0 and r == 0})
        if out[-1].stop != CONFIRMED:
            return out
        part = self._threshold(dom, out)
        threshold, k = part["speculative_disable_above_batch"], part.get("depth")
        loads = switch_loads(threshold, self.space.lattice)
        points = [switch_point(b, k, threshold) for b in loads if k is not None]
        points += [(b, 0, 0) for b in loads if points and (b, 0, 0) not in chosen]
        if any(p not in self.points for p in points):  # the engine refuses the switch there
            return out
        used = sum(len(s.points) for s in out)
        more = switch_steps(out[-1], points, measured, self.confirm_cells - used, threshold)
        if len(more) == 2 and all((b, threshold) in self.switched for b in loads):
            at, up = ((b, self.switched[(b, threshold)]) for b in loads)
            self.switch = switch_verdict(threshold, at, up, self.space.tolerance, self.spread)
        return [*out[:-1], *more]

    def _evidence(self, confirming: Sequence[ConfirmStep]
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The confirming cells measured at the first step, and those that disagreed (once
        the confirmation stopped)."""
        last = confirming[-1] if confirming else None
        off = list(last.disagree) if last is not None and last.stop else []
        return [(b, k) for s in confirming[:1] for b, k, _ in s.points if (b, k) in self.own], off

    def _threshold(self, dom: dict[str, Any], confirming: Sequence[ConfirmStep]
                   ) -> dict[str, Any]:
        """The threshold part of the first domain's recommendation (recommend.py
        `threshold_part`), from the confirmation's evidence."""
        asked, off = self._evidence(confirming)
        near = crossover_neighbours((dom["crossover"] or {}).get("crossover"),
                                    self.space.lattice)
        return threshold_part(dom["crossover"], self.own, near if asked else (), off)

    def answers(self) -> dict[str, Any]:
        """The surface and the prediction from what `replay` read (search.json `result`):
        for the profile given, else the drafter's own cells the surface measured."""
        profile = self.profile
        if profile is None and self.run_dir is not None:
            table = self.read.table
            if table is not None and self.profiled is not None:
                table = table[table.cell_id.isin(self.profiled)]
            profile = own_profile(self.run_dir, table, str(self.run_dir))
        fitted = {k: c for k, c in self.read.costs.items()
                  if k[1] > 0 and (self.fitted is None or k in self.fitted)}
        out = surface_json(self.read, fitted, *self.sources(), self.space.lattice,
                           self.space.depths, mean_acceptance(profile),
                           {r: drafter_name(self.space, r) for r in self.read.rungs})
        out["zero"] = zero_json(self.read.own_costs, self.space.lattice, self.spread)
        surface = interpolated(fitted, self.space.lattice, self.space.depths)
        costs, widening = widened(surface, self.read.length_checks)
        zero = zero_speedups(self.read.own_costs, self.space.lattice)
        out["prediction"] = (None if profile is None or not costs else
                             prediction_json(costs, profile, engine_forms(self.template),
                                             self.depth, self.variant, self.workload,
                                             self.spread, {b: e[0] for b, e in zero.items()},
                                             surface if widening else None))
        if out["prediction"] is not None:
            out["prediction"]["widened"] = {str(b): round(r, 4) for b, r in widening.items()}
        return out

    def sources(self) -> tuple[str, dict[tuple[int, int], str]]:
        """Where the measured points of the surface came from: the fitted ones `forced` or
        `own` (the drafter's own cells the surface's steps measured); the rest of the
        drafter's own cells, points of the surface too but not fitted (the confirmation's
        confirm the prediction, they do not move it), `own` or `confirm`, by (load, depth)."""
        fitted = (set(self.read.costs) if self.fitted is None else self.fitted
                  ) if not self.space.forced else set()
        out = {(b, k): "confirm" if (b, k) in self.confirming else "own"
               for b, k in self.read.own_costs if k > 0 and (b, k) not in fitted}
        return "forced" if self.space.forced else "own", out

    def recommendations(self, prediction: dict[str, Any] | None,
                        confirming: Sequence[ConfirmStep]) -> list[dict[str, Any]]:
        """One recommendation per domain of the profile; the first domain's with the
        confirmation's evidence (the only one the drafter's own cells confirm) and the
        threshold's confirmation with the switch applied."""
        if not prediction:
            return []
        asked, off = self._evidence(confirming)
        forms = engine_forms(self.template)
        zero = zero_speedups(self.read.own_costs, self.space.lattice)
        out = []
        for i, (name, dom) in enumerate(prediction["domains"].items()):
            best = {int(b): int(k) for b, k in dom["best"].items()}
            first = i == 0 and bool(confirming)
            settled = settle(best, *((self.own, asked, off) if first else ({}, [], [])))
            part = (self._threshold(dom, confirming) if first
                    else threshold_part(dom["crossover"], {}, (), []))
            plausible = {int(b): ks for b, ks in dom["plausible_depths"].items()}
            single = single_status(dom.get("single"), asked if first else [], off if first else [])
            if single is not None and single["status"] == CONTRADICTED:
                # on the intervals the first choice was made on (widened by the spread there)
                predicted = {(c["load"], c["depth"]): (c["speedup"], *c.get("decided_on",
                                                                            c["interval"]))
                             for c in dom["cells"] if c["speedup"] is not None}
                single = rechosen(single, predicted, self.own, {b: e[0] for b, e in zero.items()})
            out.append(recommendation(settled, part, forms, name, zero, self.spread,
                                      self.switch if first else None, plausible, single))
        return out

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        space = self.space
        surface = [s for s in steps if isinstance(s, SurfaceStep)]
        confirming = [s for s in steps if isinstance(s, ConfirmStep)]
        answers = self.answers()
        res = {**result(space, surface), "note": note, **answers}
        res["surface_stop"] = res["stop"]
        if self.space.profile and self.earlier is None and res["stop"] is not None:
            res["stop"] = confirming[-1].stop if confirming else None
            res["stop_meaning"] = CONFIRM_STOPS.get(res["stop"] or "", "")
        res["confirmation"] = {
            "cells": sum(len(s.points) for s in confirming), "max_cells": self.confirm_cells,
            "own": [{"load": b, "depth": k, "speedup": round(e[0], 4),
                     "interval": [round(e[1], 4), round(e[2], 4)]}
                    for (b, k), e in sorted(self.own.items())],
            "disagree": [list(d) for d in (confirming[-1].disagree if confirming else ())],
            "switch": self.switch,
            "stop": confirming[-1].stop if confirming else None}
        recs = (self.recommendations(answers["prediction"], confirming)
                if res["stop"] is not None else [])
        res = {"recommendation": recs[0] if recs else None, "recommendations": recs, **res}
        if self.earlier is not None:
            res["from"] = str(self.earlier)
        return {"kind": "speculation", "forced": space.forced, "zero": space.zero,
                "baseline": BASELINE,
                "variant": self.variant,
                "workload": self.workload, "load_kind": "concurrency",
                "engine": str(self.template.config["engine"]["name"]), "depth": self.depth,
                "lattice": list(space.lattice), "coarse": list(space.coarse),
                "depths": list(space.depths), "rates": list(space.rates),
                "result": res, "steps": [s.as_json() for s in steps]}

    def plan_lines(self) -> list[str]:
        """The question, the rectangle, the first step's cells and starts against the dense
        grid's, the starts' time; or, from an earlier surface, the prediction itself."""
        if self.earlier is not None:
            self.replay(self.earlier, Slo())
            return plan_lines(self, self.answers()["prediction"])
        engine = self.template.config["engine"]
        start = engines.get(engine["name"]).start_seconds(engine.get("device") or "cuda")
        return plan_lines(self, None, start)

