"""What the questions' steps share (pure): the replay, the budget a step is cut to, the lines."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, Protocol, TypeVar


class _Step(Protocol):
    @property
    def stop(self) -> str | None: ...

    @property
    def points(self) -> Sequence[Any]: ...


S = TypeVar("S", bound=_Step)
P = TypeVar("P")


class StuckSearch(RuntimeError):
    """A step that neither stops nor asks for a new point (a question's fault, never a cell's)."""


def replay(step_after: Callable[[set, int], S], measured: Container, first: int = 1
           ) -> list[S]:
    """Every step, each from the points its predecessors chose (`step_after(chosen, number)`).
    A step that neither stops nor asks for a point not yet chosen would be asked again and again
    (the steps are pure): StuckSearch naming it."""
    steps: list[S] = []
    chosen: set = set()
    while True:
        step = step_after(chosen, first + len(steps))
        steps.append(step)
        if step.stop is not None or not all(p in measured for p in step.points):
            return steps
        if chosen.issuperset(step.points):
            raise StuckSearch(f"search step {first + len(steps) - 1} asks for no new point and "
                               "does not stop: the question cannot go on")
        chosen.update(step.points)


def fit(points: Sequence[P], room: int, why: str, spent: str, stop: str = "budget",
        unit: str = "point(s)", where: str = "the budget"
        ) -> tuple[tuple[P, ...], str, str | None]:
    """(the points `room` holds, `why`, None); with no room, ((), why not measured, `stop`)."""
    if room <= 0:
        return (), f"{why}: not measured, {spent}", stop
    if room < len(points):
        why += f" (only {room} of {len(points)} {unit} fit {where})"
    return tuple(points[:room]), why, None


def step_lines(steps: Sequence[Mapping[str, Any]], describe: Callable[[Any], str],
               phases: bool = False) -> list[str]:
    """`  step N: why -> measures P1, P2` (`step N (phase): ...` with `phases`)."""
    lines = []
    for step in steps:
        points = ", ".join(describe(p) for p in step["points"])
        phase = f" ({step['phase']})" if phases else ""
        lines.append(f"  step {step['number']}{phase}: {step['why']}"
                     + (f" -> measures {points}" if points else ""))
    return lines


def unfinished(result: Mapping[str, Any]) -> str:
    return f"  not finished: {result.get('note') or 'the last step is still to run'}"
