"""A search's steps as the report prints them (search.json `steps`), for every kind of search:
one line per step with the points it measured, and the line of a search not finished."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


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
