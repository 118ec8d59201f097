"""A question a run asks with an adaptive search (`grid.search.kind`, docs/search.md), behind
one protocol modelled on Ray Tune's `Searcher`: the run loop asks the question for the next
cells given what is committed (`Planned.replay`, the `suggest`), runs them, and asks again (the
`on_trial_complete` is the commit: nothing but the committed cells carries a search's state).

- `Question` (one per kind, in `REGISTRY`): plans the cells it may choose and its setup from the
  config (`universe`, `setup`), and reads its own trace for the report (`lines`, `section`,
  `answer`, `decision`, `recommendations`, `write_files`).
- `Planned` (one per run): its cells by point, its replay from the committed cells (pure but
  for reading them), the trace it writes to search.json, its stop line.

Each question is one folder `grid/questions/<kind>/`; the run loop (grid/execute/search.py,
grid/run.py) and the report (grid/report/) go through `question(kind)` and never name a kind.
Layers: above grid.store, grid.plan and grid.analysis (which it uses), below grid.execute and
grid.report (which use it)."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig

from grid.analysis import Slo
from grid.plan.cells import Cell
from grid.plan.search import SearchError
from grid.plan.workloads import WorkloadPlan

REGISTRY: dict[str, str] = {
    "crossover": "grid.questions.crossover",
    "threshold": "grid.questions.threshold",
    "depth": "grid.questions.depth",
    "breakeven": "grid.questions.breakeven",
    "capacity": "grid.questions.capacity",
}
"""`grid.search.kind` -> the module whose `QUESTION` answers it (imported when asked, as
engines.get imports an engine: adding a question touches nothing else)."""


class Step(Protocol):
    """What the run loop reads of a step (each question's own step class has more)."""

    number: int
    why: str
    stop: str | None
    cells_before: int
    points: Any


class Planned(ABC):
    """A question planned for one run: its cells, its replay, its trace."""

    max_cells: int
    """The budget (grid.search.max_cells)."""

    @abstractmethod
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The steps replayed from the committed cells, and the points measured so far; the
        last step names the points to measure next, or why the search stopped."""

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


class Wrapped(Planned):
    """A Planned over a planned setup (grid/plan/: its cells by point, its first step)."""

    def __init__(self, setup: Any) -> None:
        self.setup = setup
        self.max_cells = int(setup.space.max_cells)

    def cells_of(self, points: Sequence[Any], first: str | None = None) -> list[Cell]:
        return self.setup.cells_of(points, first)  # type: ignore[no-any-return]

    def first_points(self) -> list[Any]:
        return list(self.setup.first_step().points)

    @property
    def variant_cell(self) -> Cell:
        return self.setup.variant_cell  # type: ignore[no-any-return]

    def describe(self, point: Sequence[int]) -> str:
        return str(self.setup.describe(point))

    def plan_lines(self) -> list[str]:
        return list(self.setup.plan_lines())


class Question(ABC):
    """One kind of question; the report's hooks read its trace (a dict from search.json)."""

    kind: str

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
