"""Which speculative_disable_above_batch to set? (`grid.search.kind=threshold`, docs/search.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import engines
from grid.analysis import Slo
from grid.analysis.search import Space
from grid.plan.cells import Cell
from grid.plan.search import SearchError, search_space, with_settings
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned
from grid.questions.crossover import Crossover, CrossoverPlanned, compared_cells
from grid.questions.crossover import trace_lines as crossover_lines
from grid.questions.crossover.steps import Point
from grid.questions.measure import compared_points
from grid.questions.threshold.steps import (
    Pair,
    ThresholdConfirmStep,
    describe_point,
    replay_threshold,
    reserve_cells,
    threshold_result,
)


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


class ThresholdPlanned(CrossoverPlanned):
    kind = "threshold"

    def __init__(self, space: Space, points: dict[Point, tuple[Cell, Cell]],
                 honoured: tuple[int, ...], candidates: int) -> None:
        super().__init__(space, points)
        self.honoured = honoured
        """The values the engine tells apart (Engine.threshold_values), ascending."""
        self.candidates = candidates
        """Top-ranked values confirmed (grid.search.candidates)."""

    @property
    def reserve(self) -> int:
        return reserve_cells(self.candidates)

    def pair_cells(self, pair: Sequence[int]) -> tuple[Cell, Cell]:
        """A confirmation point's cells: the variant with each threshold, both at the higher."""
        low, high, repeat = pair
        template = self.points[(self.space.lattice[0], repeat)][1]
        low_cell, high_cell = (with_settings(template, {
            "variant.speculative_disable_above_batch": value, "load.concurrency": high})
            for value in (low, high))
        return low_cell, high_cell

    def cells_at(self, point: Sequence[int]) -> tuple[Cell, Cell]:
        return self.pair_cells(point) if len(point) == 3 else super().cells_at(point)

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        measured = compared_points(run_dir, self.points, slo)

        def steps_with(confirmed: dict[Pair, Any]) -> list[Any]:
            return list(replay_threshold(self.space, self.reserve, self.honoured,
                                         self.candidates, measured, confirmed))

        # The first replay names the pairs; every repeat of them is read for the second.
        steps = steps_with({})
        pairs = {(a, b, r) for a, b, _ in (p for p in steps[-1].points if len(p) == 3)
                 for r in range(self.space.max_repeats)}
        if not pairs:
            return steps, set(measured)
        confirmed = compared_points(run_dir, {p: self.pair_cells(p) for p in pairs}, slo)
        return steps_with(confirmed), set(measured) | set(confirmed)

    describe = staticmethod(describe_point)

    def head(self) -> dict:
        return {**super().head(), "honoured": list(self.honoured),
                "candidates": self.candidates}

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        trace = super().trace(steps, note)
        trace["result"].update(threshold_result(steps))
        return trace

    def stop_line(self, steps: Sequence[Any]) -> str:
        last = steps[-1]
        return (f"; set speculative_disable_above_batch={last.threshold}"
                if isinstance(last, ThresholdConfirmStep) and last.threshold is not None else "")

    def plan_lines(self) -> list[str]:
        lines = super().plan_lines()
        lattice = self.space.lattice
        inside = [v for v in self.honoured if lattice[0] <= v <= lattice[-1]]
        shown = " ".join(str(v) for v in inside[:12]) + (
            f" ... {inside[-1]}" if len(inside) > 12 else "")
        lines.insert(3, f"  then: the {len(inside)} speculative_disable_above_batch values the "
                     f"engine tells apart in the range ({shown}) ranked by predicted regret; the "
                     f"top {self.candidates} confirmed where they differ ({self.reserve} of the "
                     "cells kept for it)")
        return lines


def _value_text(value: int | None) -> str:
    return ("no threshold needed within the searched range" if value is None else
            "keep speculation off (speculative_disable_above_batch=0)" if value == 0 else
            f"set speculative_disable_above_batch={value}")


def searched_recommendations(recs: list[dict], trace: dict) -> list[dict]:
    """The confirmed value in place of the crossover rule's (kept as `crossover_rule`)."""
    res = trace["result"]
    if not res.get("threshold_stop"):
        return recs
    value = res.get("threshold")
    signs: dict[str, str] = next((s.get("signs") for s in reversed(trace["steps"])
                                  if s.get("phase") == "confirm" and s.get("signs")), {})
    measured = "; ".join(
        f"{pair.replace('->', ' vs ')}: {'higher' if sign.startswith('+') else 'lower'} wins"
        + ("" if sign in ("+", "-") else " (point estimate)") for pair, sign in signs.items())
    key = (trace["variant"], trace["workload"])
    old = next((r for r in recs if (r["variant"], r["workload"]) == key), None)
    rule = None if old is None else old.get("speculative_disable_above_batch")
    statement = (f"{_value_text(value)}: the threshold search's choice ({res['threshold_stop']}"
                 + (f"; {measured}" if measured else "") + ")"
                 + (f"; the crossover rule alone says {rule}" if rule != value else ""))
    new = {**(old or {"variant": key[0], "workload": key[1]}),
           "speculative_disable_above_batch": value, "statement": statement,
           "source": "threshold search", "crossover_rule": rule}
    return [new if r is old else r for r in recs] + ([] if old is not None else [new])


def trace_lines(trace: dict, points: Callable[[Sequence[int]], str] = describe_point
                ) -> list[str]:
    """The crossover search's lines, then the confirmed threshold once it stopped."""
    res = trace["result"]
    lines = crossover_lines(trace, points)
    if not res.get("threshold_stop"):
        return lines
    value = res.get("threshold")
    answer = ("no threshold needed within the range" if value is None else
              "keep speculation off (0)" if value == 0 else
              f"set speculative_disable_above_batch={value}")
    return [*lines, f"  threshold: {answer} ({res['threshold_stop']}: "
            f"{res['threshold_stop_meaning']})"]


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the confirmed value and why the confirmation stopped."""
    res = trace["result"]
    if not res.get("threshold_stop"):
        return None
    return (f"{trace['variant']} on {trace['workload']}: {_value_text(res.get('threshold'))} "
            f"(the threshold search's choice after {res['cells']} cells: "
            f"{res['threshold_stop']})")


class Threshold(Crossover):
    kind = "threshold"
    lines = staticmethod(trace_lines)
    answer = staticmethod(answer_sentence)
    recommendations = staticmethod(searched_recommendations)

    def check(self, cfg: DictConfig) -> None:
        reserve = reserve_cells(int(cfg.grid.search.candidates))
        if int(cfg.grid.search.max_cells) < reserve + 4:
            raise SearchError(f"grid.search.max_cells={cfg.grid.search.max_cells} leaves the "
                              f"crossover search fewer than 4 cells after the {reserve} kept "
                              f"for confirming {cfg.grid.search.candidates} candidates")
        super().check(cfg)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        points = compared_cells(cells, self.kind)
        honoured = honoured_values(points[min(points)][1],
                                   OmegaConf.select(cfg, "hardware.name", default=None))
        planned = ThresholdPlanned(search_space(cfg), points, honoured,
                                   int(cfg.grid.search.candidates))
        return planned.with_prior(cfg.grid.search.prior, workloads)


QUESTION = Threshold()
