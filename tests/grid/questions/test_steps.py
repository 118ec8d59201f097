"""The replay every question shares (grid/questions/steps.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from grid.questions.steps import StuckSearch, replay


@dataclass(frozen=True)
class Step:
    points: tuple[int, ...]
    stop: str | None = None


def test_replay_walks_the_measured_steps_and_ends_at_the_first_unmeasured_one() -> None:
    plan = [(1, 2), (3,), (4, 5)]

    def after(chosen: set, number: int) -> Step:
        return Step(plan[number - 1]) if number <= len(plan) else Step((), "done")

    steps = replay(after, measured={1, 2, 3})
    assert [s.points for s in steps] == [(1, 2), (3,), (4, 5)]
    assert [s.points for s in replay(after, measured={1, 2, 3, 4, 5})][-1] == ()


def test_a_step_that_asks_nothing_new_and_does_not_stop_is_an_error_not_a_loop() -> None:
    def after(chosen: set, number: int) -> Step:
        return Step((1,)) if not chosen else Step(())  # the second step: nothing, no stop

    with pytest.raises(StuckSearch, match="search step 2 asks for no new point"):
        replay(after, measured={1})
