"""What a report is made of: one run folder's cells, requests, analysis, server metrics,
telemetry and findings (`RunData`, filled by grid/report/data.py load_run), and the banners that
say where its numbers come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import engines
from grid.analysis import CellStats, Decision, Slo
from grid.report.operator import OperatorView

SIM_BANNER = "SIMULATION — numbers come from specgrid's simulated SGLang server, not a GPU."
TWIN_BANNER = ("{label} — numbers come from specgrid's simulated SGLang server on a profile "
               "fitted to a run's measured cells (a twin, docs/twin.md), not a GPU.")
CPU_BANNER = ("{label} — measured on real {engines} servers running {models} on a CPU: they "
              "show what the engines do (acceptance, scheduling, streaming), not how fast a GPU "
              "serves a real model.")
CPU_MODELS = {"tiny model": "the project's tiny model",
              "tiny trained models": "models the project trained on its own shipped text"}
"""What each CPU source's models are (grid/plan/work.py source_label), for the banner."""


@dataclass
class RunData:
    run_dir: Path
    cells: pd.DataFrame
    """The loader's cells (latest attempt each)."""
    requests: pd.DataFrame
    """The request columns the analysis needs (no per-token lists)."""
    turns: pd.DataFrame
    """One row per round of each conversation cell (workload.kind=conversations; empty
    without); its sent rounds are the cell's requests in `stats`."""
    stats: CellStats
    decision: Decision
    server_metrics: pd.DataFrame
    server_deltas: pd.DataFrame
    """Per cell: counter deltas by role, the server's own tok/s and accept length
    (grid/report/serverdata.py server_deltas)."""
    telemetry: pd.DataFrame
    energy: pd.DataFrame
    """Per cell: GPU energy (J) and J per output token, where power was readable."""
    slo: Slo
    validity: list[tuple[str, str]] = field(default_factory=list)
    """(level: `warning` | `note`, text) — shown at the top of every report."""
    baseline: str = "baseline"
    """The variant the others are compared to."""
    damaged: list[str] = field(default_factory=list)
    """One line per damaged file of the run (its cell left out of the report): files that
    cannot be read, and attempts set aside as damaged that no later attempt replaced."""
    gpu_hour_usd: float | None = None
    """The price of one GPU-hour in dollars the user set (hardware.gpu_hour_usd); None = no
    dollar figures."""
    operator: OperatorView | None = None
    """Frontier, capacity under the SLOs and cost (grid/report/operator.py)."""
    acceptance: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Accept length with its interval per speculative variant x temperature x workload whose
    alignment is known (grid/analysis/lesson.py; grid/report/alignment.py shows it)."""
    search: dict | None = None
    """An adaptive search's trace (search.json, grid/questions `load_trace`), read once."""
    server_gauges: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per cell, gauge role (running, waiting, kv_usage) and scrape: the server's gauge, whatever
    its engine calls it (grid/report/serverdata.py server_gauges)."""
    lossless: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Greedy outputs of each variant against its baseline's (grid/report/lossless.py)."""

    @property
    def simulated(self) -> bool:
        return bool(len(self.cells)) and bool(self.cells.simulated.fillna(False).any())

    @property
    def provisional(self) -> bool:
        """A real engine's run with one repeat per cell: its answer is given as provisional
        (its intervals cover within-run noise only, grid/report/answer.py `scope`)."""
        repeats = self.decision.repeats.get("most", 0) if self.decision.repeats else 0
        return bool(len(self.cells)) and not self.simulated and int(repeats or 0) < 2

    @property
    def on_cpu(self) -> bool:
        """Whether real engines served (some of) the run on a CPU."""
        return "source" in self.cells and bool(
            self.cells.source.fillna("").str.startswith("real engine, CPU").any())

    @property
    def label(self) -> str | None:
        """What a figure title is prefixed with: where the numbers come from, when not GPUs."""
        if self.simulated:
            return " / ".join(self._sim_sources())
        return " / ".join(s.upper() for s in self._cpu_sources()) if self.on_cpu else None

    def _sim_sources(self) -> list[str]:
        """How the simulated cells are labelled: SIMULATION, or e.g. SIMULATION (twin of RUN)
        for cells served on a twin's profile (grid/plan/work.py source_label)."""
        sim = self.cells[self.cells.simulated.fillna(False).astype(bool)]
        found = sorted({str(s) for s in sim.source.dropna()
                        if str(s).startswith("SIMULATION")}) if "source" in sim else []
        return found or ["SIMULATION"]

    def sim_banner(self) -> str:
        sources = self._sim_sources()
        if sources == ["SIMULATION"]:
            return SIM_BANNER
        return TWIN_BANNER.format(label=" / ".join(sources))

    def _cpu_sources(self) -> list[str]:
        return sorted(str(s) for s in self.cells.source.dropna().unique()
                      if str(s).startswith("real engine, CPU"))

    def cpu_banner(self) -> str:
        names = sorted(str(e) for e in self.cells.engine.dropna().unique()
                       if _real_launched(e))
        sources = self._cpu_sources()
        models = [CPU_MODELS.get(s.removeprefix("real engine, CPU, "), "a model") for s in sources]
        return CPU_BANNER.format(label=" / ".join(s.upper() for s in sources),
                                 engines=" and ".join(names) or "inference",
                                 models=" and ".join(models))


def _real_launched(name: object) -> bool:
    """Whether the engine called `name` is a real one specgrid launched (not a simulated one,
    not a server someone else runs, not one engines/ no longer has)."""
    kind = engines.find(name)
    return kind is not None and kind.launches and not kind.simulated
