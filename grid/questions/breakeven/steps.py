"""The break-even search's steps (docs/search.md "The break-even search"), pure: each step works
on the lowest unresolved load (open, widen, bisect); point estimates decide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grid.questions import steps as shared

BASELINE = -1
"""The length index of a load's baseline cell."""
Point = tuple[int, int]
"""(load, length index)."""


def describe(point: Sequence[int], lengths: Sequence[float]) -> str:
    """`c=4 baseline`, `c=4 length 2.5`."""
    load, i = point
    return f"c={load} " + ("baseline" if i == BASELINE else f"length {lengths[i]:g}")


@dataclass(frozen=True)
class BreakevenSpace:
    loads: tuple[int, ...]
    """The loads (concurrency) the curve is found at, ascending."""
    lengths: tuple[float, ...]
    """The forced lengths the search may measure, ascending."""
    max_cells: int

    @property
    def dense_cells(self) -> int:
        """The cells of the dense grid over the same loads and lengths (baseline included)."""
        return len(self.loads) * (len(self.lengths) + 1)


@dataclass
class BreakevenStep:
    number: int
    why: str
    cells_before: int
    points: list[Point]
    stop: str | None = None
    """`resolved` or `budget`; None while the search goes on."""
    brackets: dict[int, list[Any]] = field(default_factory=dict)
    """Resolved loads so far: load -> [lower length, upper length, where]."""

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "points": [list(p) for p in self.points],
                "brackets": {str(k): v for k, v in self.brackets.items()}}


def _bracket(load: int, known: Mapping[Point, float]) -> tuple[int | None, int | None]:
    """(highest measured index that does not pay, lowest measured index above it that pays)
    at one load, from the throughputs known; None where there is none."""
    base = known.get((load, BASELINE))
    ratios = {i: v / base for (c, i), v in known.items() if c == load and i != BASELINE} if (
        base) else {}
    lo = max((i for i, r in ratios.items() if r < 1.0), default=None)
    return lo, min((i for i, r in ratios.items() if r >= 1.0 and (lo is None or i > lo)),
                   default=None)


def _resolved(space: BreakevenSpace, lo: int | None, hi: int | None) -> list[Any] | None:
    """[lower length, upper length, where] of a resolved load's bracket, else None."""
    last = len(space.lengths) - 1
    if lo is None and hi == 0:
        return [None, space.lengths[0], "below"]
    if hi is None and lo == last:
        return [space.lengths[last], None, "above"]
    if lo is not None and hi == lo + 1:
        return [space.lengths[lo], space.lengths[hi], "inside"]
    return None


def _next_indices(space: BreakevenSpace, load: int, known: Mapping[Point, float],
                  bracket: tuple[int | None, int | None], previous: list[Any] | None
                  ) -> tuple[list[int], str]:
    measured = sorted(i for (c, i) in known if c == load and i != BASELINE)
    last = len(space.lengths) - 1
    if not measured:
        if previous is None:
            return [0, last], "the lengths' ends"
        lo, _, where = previous
        i = (0 if where == "below" else last - 1 if where == "above"
             else space.lengths.index(lo))
        return [i, i + 1], "the bracket of the load below"
    lo, hi = bracket
    span = max(1, measured[-1] - measured[0])
    if hi is None:
        return [min(last, measured[-1] + span)], "none pays yet: widen upwards"
    if lo is None:
        return [max(0, measured[0] - span)], "all pay: widen downwards"
    return [(lo + hi) // 2], "bisect"


def next_step(space: BreakevenSpace, known: Mapping[Point, float], number: int = 1
              ) -> BreakevenStep:
    """The step after the cells `known` (point -> output tok/s, point estimates)."""
    cells = len(known)
    brackets: dict[int, list[Any]] = {}
    previous: list[Any] | None = None
    for load in space.loads:
        found = _bracket(load, known)
        if (done := _resolved(space, *found)) is not None:
            brackets[load] = previous = done
            continue
        indices, why = _next_indices(space, load, known, found, previous)
        wanted = ([(load, BASELINE)] if (load, BASELINE) not in known else []) + [
            (load, i) for i in dict.fromkeys(indices) if (load, i) not in known]
        room = space.max_cells - cells
        if room < 1:
            return BreakevenStep(number, f"budget spent at c={load}", cells, [], "budget",
                                 brackets)
        lengths = ", ".join(f"{space.lengths[i]:g}" for _, i in wanted if i != BASELINE)
        return BreakevenStep(number, f"c={load}: {why} ({lengths or 'baseline'})", cells,
                             wanted[:room], None, brackets)
    return BreakevenStep(number, "every load resolved", cells, [], "resolved", brackets)


def replay(space: BreakevenSpace, measured: Mapping[Point, float]) -> list[BreakevenStep]:
    """The search's steps from the committed cells (grid/questions/steps.py `replay`)."""
    return shared.replay(lambda chosen, n: next_step(space, {p: measured[p] for p in chosen}, n),
                         measured)


def chosen(steps: Sequence[BreakevenStep]) -> list[Point]:
    """Every point the steps chose, in order."""
    return [p for s in steps for p in s.points]
