"""The plan's prediction of where the drafter pays, before any server starts
(`breakeven.drafter_run`, docs/report.md "Break-even acceptance"): for each speculative
configuration and workload of the plan, the break-even accept length at each of its
closed-loop loads as a model predicts it, and the earlier run's per-domain lengths placed on
it (grid/analysis/breakeven.py `predicted_level`, `place`).

The model: the twin given as `grid.search.prior` (asked as a search's prior is,
grid/plan/search.py `ask_twin`) with the variant's acceptance forced at each length, else the
engine's own estimate of the baseline's cell and of the forced one (engines.modeller: the
simulator's); a real engine without a twin predicts nothing, and the plan says so. The lengths
are the break-even search's (`grid.search.lengths`, default 9 from 1 to k + 1)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

import engines
from engines.forced import speculative_steps
from grid.analysis.breakeven import Level, configuration, predicted_level
from grid.analysis.breakeven_drafter import at_load, place
from grid.analysis.drafter_run import DrafterRun
from grid.plan.cells import Cell
from grid.plan.estimate import cell_work
from grid.plan.search import BASELINE, LENGTH_KEY, ask_twin, breakeven_lengths, with_settings
from grid.plan.workloads import WorkloadPlan

Pairs = dict[int, tuple[Cell, Cell]]
"""Load -> (the baseline's cell, the configuration's cell) at that load."""


def curve_pairs(cells: Sequence[Cell]) -> dict[tuple[str, str], Pairs]:
    """(configuration, workload) -> the closed-loop loads where the plan has the baseline and
    a cell of that speculative configuration on the same engine and workload."""
    base = {(c.config["engine"]["name"], c.workload, c.concurrency): c for c in cells
            if c.variant == BASELINE and c.rate is None}
    out: dict[tuple[str, str], Pairs] = {}
    for cell in cells:
        b = base.get((cell.config["engine"]["name"], cell.workload, cell.concurrency))
        if (b is not None and cell.variant != BASELINE and cell.concurrency is not None
                and speculative_steps(cell.config["variant"].get("args") or {}) is not None):
            pairs = out.setdefault((configuration(cell.variant), cell.workload), {})
            pairs.setdefault(cell.concurrency, (b, cell))
    return out


def _forced(cell: Cell, length: float) -> Cell:
    return with_settings(cell, {LENGTH_KEY: length, "variant.forced_acceptance.rates": None})


def predict_ratios(cfg: DictConfig, pairs: Pairs, lengths: Sequence[float],
                   workloads: WorkloadPlan) -> tuple[str, list[list[float]]] | None:
    """(the source's label, per load ascending: the configuration's output tok/s over the
    baseline's at each length) from the twin of `grid.search.prior`, else the engine's own
    estimate (equal requests: the ratio of the two cells' seconds); None when neither can."""
    loads = sorted(pairs)
    prior = OmegaConf.select(cfg, "grid.search.prior", default=None)
    if prior is not None:
        base, cell = pairs[loads[0]]
        label, by_length = "", []
        for a in lengths:
            _, label, speedups = ask_twin(str(prior), base, _forced(cell, a), loads, workloads)
            by_length.append([1.0 + s for s in speedups])
        return label, [list(r) for r in zip(*by_length, strict=True)]
    model = engines.modeller(pairs[loads[0]][1].config["engine"]["name"])
    if model is None:
        return None
    ratios = []
    for load in loads:
        base, cell = pairs[load]
        seconds = model.estimate_cell_seconds(cell_work(base))
        ratios.append([seconds / model.estimate_cell_seconds(dataclasses.replace(
            cell_work(_forced(cell, a)), num_requests=base.num_requests)) for a in lengths])
    note = model.provenance(base.config["engine"].get("options") or {})
    return f"SIMULATION ({note})" if note else "SIMULATION", ratios


def _value(level: Level) -> str:
    sign = {"below": "<= ", "above": ">= "}.get(level.where, "")
    return f"c={level.load:g} {sign}{level.value:.2f}"


def prediction_lines(cfg: DictConfig, cells: Sequence[Cell], workloads: WorkloadPlan,
                     run: DrafterRun) -> list[str]:
    """What the plan prints: per configuration and workload, the predicted break-even length
    per load and each domain's length from `run` placed on it, or that no model predicts.
    ValueError (`DrafterRun.pick`) when `run` has no clear counterpart of a configuration, or
    one measured at another speculative depth than the plan's."""
    found = curve_pairs(cells)
    if not found:
        return [f"break-even prediction: none (the plan has no speculative variant beside "
                f"{BASELINE} at a closed-loop load to place run {run.run_id}'s drafter on)"]
    out = []
    for (config, workload), pairs in sorted(found.items()):
        steps = speculative_steps(pairs[min(pairs)][1].config["variant"]["args"])
        assert steps is not None  # curve_pairs keeps speculative cells only
        source = run.pick(config, steps)
        measured = run.lengths[source]
        lengths = breakeven_lengths(cfg, steps)
        predicted = predict_ratios(cfg, pairs, lengths, workloads)
        head = (f"break-even of {config} vs {BASELINE} on {workload}, the drafter's accept "
                f"length from run {run.run_id} ({source})")
        if predicted is None:
            engine = pairs[min(pairs)][1].config["engine"]["name"]
            out.append(f"{head}: no prediction possible (engine {engine} has no model of its "
                       "speed before measuring; grid.search.prior=TWIN gives one)")
            out += [f"  {d}: accept length {m[1]:.2f} [{m[2]:.2f}, {m[3]:.2f}] over {m[0]} "
                    "requests" for d, m in sorted(measured.items())]
            continue
        label, ratios = predicted
        levels = [predicted_level(config, workload, load, lengths, r)
                  for load, r in zip(sorted(pairs), ratios, strict=True)]
        out.append(f"{head} [predicted, {label}, before any server starts]:")
        out.append("  break-even length: " + ", ".join(_value(lv) for lv in levels))
        for d, m in sorted(measured.items()):
            placed = place(levels, config, workload, d, m, run.run_id)
            pays = placed.pays_up_to
            tail = "".join(f"; {t}" for t in (placed.stop, placed.note) if t)
            out.append(f"  {d}: accept length {m[1]:.2f} [{m[2]:.2f}, {m[3]:.2f}] over {m[0]} "
                       "requests: predicted: " + (f"pays up to {at_load(pays)}" if pays
                                                   else "pays at none of these loads") + tail)
    return out
