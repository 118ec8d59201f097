"""A question a run asks with an adaptive search (`grid.search.kind`, docs/search.md), behind
one protocol modelled on Ray Tune's `Searcher` (docs/architecture.md "A question is one
folder"): the run loop asks the `Planned` question for the next cells given what is committed
(`replay`, the `suggest`), runs them, and asks again; nothing but the committed cells carries a
search's state. Each question is one folder `grid/questions/<kind>/`, registered in
`REGISTRY`; the run loop and the report go through `question(kind)` and never name a kind."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.plan.cells import Cell
from grid.plan.search import SearchError, check_search
from grid.plan.workloads import WorkloadPlan

TRACE_FILE = "search.json"
"""A run's trace of its question (`Planned.trace`), in the run folder."""
REGISTRY: dict[str, str] = {
    "crossover": "grid.questions.crossover",
    "threshold": "grid.questions.threshold",
    "depth": "grid.questions.depth",
    "breakeven": "grid.questions.breakeven",
    "capacity": "grid.questions.capacity",
    "surface": "grid.questions.surface",
}
"""`grid.search.kind` -> the module whose `QUESTION` answers it (imported when asked, as
engines.get imports an engine: adding a question touches nothing else)."""


class Planned(ABC):
    """A question planned for one run: its cells, its replay, its trace."""

    max_cells: int
    """The budget (grid.search.max_cells)."""

    @abstractmethod
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The steps replayed from the committed cells (each with its `number`, `why`,
        `points`, `stop`, `cells_before`), and the points measured so far; the last step names
        the points to measure next, or why the search stopped."""

    @abstractmethod
    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        """The points' cells, variant `first` (whose server may still run) first."""

    @abstractmethod
    def first_points(self) -> list[Any]:
        """The first step's points (what `plan=true` shows)."""

    @abstractmethod
    def trace(self, steps: Sequence[Any], note: str | None) -> dict:
        """search.json: the question (with its `kind`), every step, the outcome."""

    @property
    @abstractmethod
    def variant_cell(self) -> Cell:
        """The compared variant's planned cell (its alignment goes to cells planned later)."""

    def describe(self, point: Sequence[int]) -> str:
        return str(tuple(point))

    def plan_lines(self) -> list[str]:
        return []

    def stop_line(self, steps: Sequence[Any]) -> str:
        """What the `search stopped` line adds (the answer, in a few words)."""
        return ""


class Question(ABC):
    """One kind of question; the report's hooks read its trace (a dict from search.json)."""

    kind: str

    def check(self, cfg: DictConfig) -> None:
        """Everything about `grid.search` that can be checked on the composed config, before
        any cell is composed (SearchError: one line)."""
        check_search(cfg)

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """Every cell the question may choose, from the grid's cells at the lattice's loads
        (repeat 0), and what `setup` needs besides the planned cells."""
        return cells, None

    @abstractmethod
    def setup(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan,
              context: Any) -> Planned:
        """The question planned on the universe's planned cells (SearchError: cannot run)."""

    @abstractmethod
    def lines(self, trace: dict) -> list[str]:
        """The terminal lines: a header, one per step, the outcome."""

    def answer(self, trace: dict) -> str | None:
        """The report's first sentence (None while it has no answer)."""
        return None

    def section(self, trace: dict) -> str:
        """The HTML section."""
        lines = self.lines(trace)
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
        return f"<h2>Adaptive search</h2><p>{escape(lines[0])}</p><ol>{items}</ol>"

    def decision(self, trace: dict) -> dict:
        """Entries decision.json adds beside `search` (the trace itself)."""
        return {}

    def recommendations(self, recs: list[dict], trace: dict) -> list[dict]:
        """The decision's recommendations, as the question's answer changes them."""
        return recs

    def write_files(self, run_dir: Path, trace: dict) -> None:  # noqa: B027 - most write none
        """Files the report writes beside it (a setting to paste)."""


def question(kind: str) -> Question:
    """The registered question of a kind; SearchError naming the kinds otherwise."""
    if kind not in REGISTRY:
        raise SearchError(f"grid.search.kind={kind!r} is not one of {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[kind]).QUESTION  # type: ignore[no-any-return]


def traced(trace: dict) -> Question | None:
    """The question that wrote a trace (search.json; a trace written before `kind` was: the
    crossover search's), None for a kind not registered."""
    kind = str(trace.get("kind", "crossover"))
    return question(kind) if kind in REGISTRY else None
