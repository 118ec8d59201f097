"""Which speculative_disable_above_batch to set? (`grid.search.kind=threshold`,
docs/search.md): the crossover search (grid/questions/crossover/), then its candidate values
ranked and confirmed on the engine's own threshold (grid/analysis/threshold.py, pure). Its
confirmed value replaces the crossover rule's recommendation (report.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grid.analysis import Slo
from grid.analysis.search import Measured
from grid.analysis.threshold import ConfirmStep, Pair, replay_threshold, threshold_result
from grid.plan.search import SearchSetup
from grid.questions import Planned
from grid.questions.crossover import Crossover, CrossoverPlanned
from grid.questions.measure import measured_points
from grid.questions.threshold.report import (
    answer_sentence,
    searched_recommendations,
    threshold_line,
)


class ThresholdPlanned(CrossoverPlanned):
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        setup = self.setup
        t = setup.threshold
        assert t is not None
        measured = measured_points(run_dir, setup.points, slo)

        def steps_with(confirmed: Mapping[Pair, Measured]) -> list[Any]:
            return list(replay_threshold(setup.space, t.reserve, t.honoured, t.candidates,
                                         measured, confirmed))

        # The pairs follow from the crossover search's cells alone, so the first replay names
        # them; every repeat of them is read at once, and the second replay is the search.
        steps = steps_with({})
        pairs = {(a, b, r) for a, b, _ in (p for p in steps[-1].points if len(p) == 3)
                 for r in range(setup.space.max_repeats)}
        if not pairs:
            return steps, set(measured)
        confirmed = measured_points(run_dir, {p: setup.pair_cells(p) for p in pairs}, slo)
        return steps_with(confirmed), set(measured) | set(confirmed)

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        trace = super().trace(steps, note)
        last = steps[-1]
        if isinstance(last, ConfirmStep):
            trace["result"] = {**trace["result"], **threshold_result(steps),
                               "cells": last.cells_before}
        return trace

    def stop_line(self, steps: Sequence[Any]) -> str:
        last = steps[-1]
        return (f"; set speculative_disable_above_batch={last.threshold}"
                if isinstance(last, ConfirmStep) and last.threshold is not None else "")


class Threshold(Crossover):
    kind = "threshold"

    def planned(self, setup: SearchSetup) -> Planned:
        return ThresholdPlanned(setup)

    def lines(self, trace: dict) -> list[str]:
        return super().lines(trace) + threshold_line(trace)

    def answer(self, trace: dict) -> str | None:
        return answer_sentence(trace)

    def recommendations(self, recs: list[dict], trace: dict) -> list[dict]:
        return searched_recommendations(recs, trace)


QUESTION = Threshold()
