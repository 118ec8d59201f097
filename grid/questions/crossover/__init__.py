"""Where does speculation stop paying? (`grid.search.kind=crossover`, docs/search.md): bracket
then bisect the sign of the variant's speedup over the baseline on a lattice of concurrency
levels. Plan: grid/plan/search.py; steps: grid/analysis/search.py (pure); run and trace:
run.py; report: report.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from grid.analysis import Slo
from grid.analysis.search import replay
from grid.plan.cells import Cell
from grid.plan.search import SearchSetup, search_setup, search_space, with_prior, with_repeats
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question, Wrapped
from grid.questions.crossover.report import answer_sentence, trace_lines
from grid.questions.crossover.run import search_result
from grid.questions.measure import measured_points


class CrossoverPlanned(Wrapped):
    """A crossover search planned for one run (its cells: grid/plan/search.py SearchSetup)."""

    setup: SearchSetup

    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        measured = measured_points(run_dir, self.setup.points, slo)
        return list(replay(self.setup.space, measured)), set(measured)

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        return {**self.setup.as_json(),
                "result": {**search_result(self.setup, steps), "note": note},
                "steps": [s.as_json() for s in steps]}


class Crossover(Question):
    kind = "crossover"

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        return with_repeats(cells, workloads, search_space(cfg)), None

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        setup = search_setup(search_space(cfg), cells, self.kind,
                             int(cfg.grid.search.candidates),
                             OmegaConf.select(cfg, "hardware.name", default=None))
        return self.planned(with_prior(setup, cfg.grid.search.prior, workloads))

    def planned(self, setup: SearchSetup) -> Planned:
        return CrossoverPlanned(setup)

    def lines(self, trace: dict) -> list[str]:
        return trace_lines(trace)

    def answer(self, trace: dict) -> str | None:
        return answer_sentence(trace)


QUESTION = Crossover()
