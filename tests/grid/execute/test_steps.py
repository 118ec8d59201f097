"""`finishing` (grid/execute/steps.py): a group's steps run as steps while the run goes on, and
are finished here and now when the group's work is closed meanwhile (the run stops), so a
server's stop is never left half done. Pure generators: pauses (Waits with no refs) need no
Ray."""

from __future__ import annotations

import pytest

from grid.execute.steps import Steps, Wait, WaitTimeout, blocking, finishing, pause


def _stop(log: list[str]) -> Steps[str]:
    """A stand-in for a server's stop: two bounded waits, each logged once it is over."""
    log.append("asked")
    yield from pause(0.01)
    log.append("first wait over")
    yield from pause(0.01)
    log.append("stopped")
    return "log"


def test_finishing_passes_each_wait_to_the_controller_and_returns_the_result():
    log: list[str] = []
    steps = finishing(_stop(log))
    assert next(steps) == Wait([], timeout_s=0.01)
    assert log == ["asked"]  # nothing more until the controller resumes it
    assert steps.throw(WaitTimeout()) == Wait([], timeout_s=0.01)  # the pause is over
    assert log == ["asked", "first wait over"]
    with pytest.raises(StopIteration) as end:
        steps.throw(WaitTimeout())
    assert end.value.value == "log"
    assert log == ["asked", "first wait over", "stopped"]


def test_finishing_closed_midway_finishes_the_rest_here_and_now():
    log: list[str] = []
    steps = finishing(_stop(log))
    next(steps)
    steps.close()  # the run stops while the group waits for its server's stop
    assert log == ["asked", "first wait over", "stopped"]


def test_a_wait_that_timed_out_reaches_the_step_that_set_it():
    def step() -> Steps[str]:
        try:
            yield Wait([], timeout_s=1.0)
        except WaitTimeout:
            return "timed out"
        return "answered"

    assert blocking(finishing(step())) == "timed out"
