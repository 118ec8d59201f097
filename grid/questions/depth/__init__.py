"""Which speculative depth at which load? (`grid.search.kind=depth`, docs/search.md): the
baseline and the variant's depths searched over the load lattice, a schedule of depth tiers
read from them and confirmed. Plan: grid/plan/depth.py; steps: grid/analysis/depth.py and
depth_confirm.py (pure); run and trace: run.py; report: report.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.plan.cells import Cell
from grid.plan.depth import depth_setup, depth_space, depth_universe, with_depth_prior
from grid.plan.search import search_space
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, Question, Wrapped
from grid.questions.depth.report import (
    depth_decision,
    depth_lines,
    depth_section,
    schedule_text,
    write_depth_files,
)
from grid.questions.depth.run import depth_answer, depth_steps, depth_trace


class DepthPlanned(Wrapped):
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        steps, seen = depth_steps(self.setup, run_dir, slo)
        return list(steps), seen

    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        return depth_trace(self.setup, steps, note)

    def stop_line(self, steps: Sequence[Any]) -> str:
        return depth_answer(steps)


class Depth(Question):
    kind = "depth"

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """One cell per depth and load; the context: the depth space and the variant's own
        cell (the confirmation's template)."""
        space = depth_space(cfg, search_space(cfg))
        out, template = depth_universe(cells, space.depths, workloads)
        return out, (space, template)

    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        space, template = context
        setup = depth_setup(space, cells, template, int(cfg.grid.search.confirm_cells))
        return DepthPlanned(with_depth_prior(setup, cfg.grid.search.prior, workloads))

    def lines(self, trace: dict) -> list[str]:
        return depth_lines(trace)

    def section(self, trace: dict) -> str:
        return depth_section(trace)

    def answer(self, trace: dict) -> str | None:
        res = trace["result"]
        if not res.get("stop"):
            return None
        return (f"{trace['variant']} on {trace['workload']}: run the depth schedule "
                f"{schedule_text(res.get('schedule') or [])} (the depth search's choice after "
                f"{res['cells']} cells: {res['stop']})")

    def decision(self, trace: dict) -> dict:
        depth = depth_decision(trace)
        return {"depth": depth} if depth else {}

    def write_files(self, run_dir: Path, trace: dict) -> None:
        write_depth_files(run_dir, trace)


QUESTION = Depth()
