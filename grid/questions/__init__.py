"""The question an adaptive search asks (`grid.search.kind`): one protocol, one folder per kind
(docs/architecture.md "A question is one folder", docs/questions.md)."""

from __future__ import annotations

import importlib
import json
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
    "speculation": "grid.questions.speculation",
    "capacity": "grid.questions.capacity",
}
"""`grid.search.kind` -> the module whose `QUESTION` answers it (imported when asked)."""


class Planned(ABC):
    """A question planned for one run: its cells, its replay, its trace."""

    max_cells: int
    """The budget (grid.search.max_cells)."""

    @abstractmethod
    def replay(self, run_dir: Path, slo: Slo) -> tuple[list[Any], set]:
        """The steps replayed from the committed cells, and the points measured so far."""

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
        """The checks of `grid.search` on the composed config (SearchError: one line)."""
        check_search(cfg)

    def universe(self, cfg: DictConfig, cells: list[Cell], workloads: WorkloadPlan
                 ) -> tuple[list[Cell], Any]:
        """Every cell the question may choose, and what `setup` needs besides them."""
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
        return html_section(self.lines(trace))

    def decision(self, trace: dict) -> dict:
        """Entries decision.json adds beside `search` (the trace itself)."""
        return {}

    def recommendations(self, recs: list[dict], trace: dict) -> list[dict]:
        """The decision's recommendations, as the question's answer changes them."""
        return recs

    def write_files(self, run_dir: Path, trace: dict) -> None:  # noqa: B027 - most write none
        """Files the report writes beside it (a setting to paste)."""


def html_section(lines: Sequence[str], title: str = "Adaptive search", tail: str = "") -> str:
    """The terminal lines as HTML: the first a paragraph, the others a list, then `tail`."""
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines[1:])
    return f"<h2>{title}</h2><p>{escape(lines[0])}</p><ol>{items}</ol>{tail}"


def question(kind: str) -> Question:
    """The registered question of a kind; SearchError naming the kinds otherwise."""
    if kind not in REGISTRY:
        raise SearchError(f"grid.search.kind={kind!r} is not one of {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[kind]).QUESTION  # type: ignore[no-any-return]


def schema_keys() -> list[type]:
    """Each registered question's own `grid.search` keys (its module's KEYS dataclass), for the
    config schema (grid/plan/config.py `register_configs`)."""
    modules = (importlib.import_module(m) for m in REGISTRY.values())
    return [m.KEYS for m in modules if getattr(m, "KEYS", None) is not None]


def traced(trace: dict) -> Question:
    """The question that wrote a trace."""
    return question(str(trace.get("kind")))


def load_trace(run_dir: Path) -> dict | None:
    """The run's trace (search.json); None without one, unreadable, or of no registered kind."""
    try:
        trace = json.loads((Path(run_dir) / TRACE_FILE).read_text())
    except (OSError, ValueError):
        return None
    known = isinstance(trace, dict) and str(trace.get("kind")) in REGISTRY
    return trace if known and "steps" in trace else None
