"""At which accept length does speculation break even? (`grid.search.kind=breakeven`,
docs/search.md): forced accept lengths searched load by load against the baseline, the
break-even bracketed at each load (never claimed past the data). Plan: grid/plan/breakeven.py;
steps: grid/analysis/breakeven_search.py (pure); report: report.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.analysis.breakeven_search import replay
from grid.plan.breakeven import breakeven_setup, breakeven_universe
from grid.plan.cells import Cell
from grid.plan.search import search_space
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question, Wrapped
from grid.questions.breakeven.report import answer_sentence, trace_lines
from grid.questions.measure import cell_throughputs


class BreakevenPlanned(Wrapped):
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """Point estimates decide (grid/analysis/breakeven_search.py)."""
        points = self.setup.points
        value = cell_throughputs(run_dir, points.values(), slo)
        known = {p: value[c.cell_id].value for p, c in points.items() if c.cell_id in value}
        return list(replay(self.setup.space, known)), set(known)

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        return self.setup.trace(steps, note)  # type: ignore[no-any-return]


class Breakeven(Question):
    kind = "breakeven"

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        return breakeven_universe(cfg, search_space(cfg), cells, workloads)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        return BreakevenPlanned(breakeven_setup(context, cells))

    def lines(self, trace: dict) -> list[str]:
        return trace_lines(trace)

    def answer(self, trace: dict) -> str | None:
        return answer_sentence(trace)


QUESTION = Breakeven()
