"""How a server group's work waits. Its work is a generator of steps: each step yields a
`Wait` (Ray object refs, and how long at most), the controller waits on the steps of every
running group at once with one `ray.wait` (grid/execute/controller.py), and throws
`WaitTimeout` into a step whose bound passed. So no group ever blocks another: every call to
an actor, short or long, is a step with a bound."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import ray

T = TypeVar("T")


@dataclass(frozen=True)
class Wait:
    """What a step of a group's work waits for: Ray object refs, all of them."""

    refs: list[Any]
    """None of them: a pause, over when its timeout passes (`pause`)."""
    timeout_s: float | None = None
    """The controller throws WaitTimeout into the step after this long (None: no limit)."""
    patient: bool = False
    """Keep waiting past the timeout while other groups run (they hold what this one needs)."""


Steps = Generator[Wait, None, T]
"""A group's work: yields what it waits for, returns its result."""


class WaitTimeout(Exception):
    """A Wait's refs were not all ready within its timeout."""


class CallTimeout(RuntimeError):
    """An actor did not answer a call within its bound; the message names the call."""


def call(ref: Any, what: str, timeout_s: float) -> Steps[Any]:
    """The result of one actor call (`ref`), waited for as a step of at most `timeout_s`;
    CallTimeout naming `what` past it. Ray's own errors (a dead actor, the call's exception)
    propagate."""
    try:
        yield Wait([ref], timeout_s=timeout_s)
    except WaitTimeout:
        raise CallTimeout(f"{what} did not answer within {timeout_s:g} s") from None
    return ray.get(ref, timeout=0)  # ready: no wait


def answers(refs: list[Any], timeout_s: float) -> Steps[list[tuple[bool, Any]]]:
    """Each call's answer within `timeout_s` (one wait over all of them): (True, its value),
    or (False, None) for a call that did not answer in time or raised."""
    try:
        yield Wait(refs, timeout_s=timeout_s)
    except WaitTimeout:
        pass
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
    out: list[tuple[bool, Any]] = []
    for ref in refs:
        try:
            out.append((True, ray.get(ref, timeout=0)) if ref in ready else (False, None))
        except ray.exceptions.RayError:
            out.append((False, None))
    return out


def pause(seconds: float) -> Steps[None]:
    """Wait `seconds` doing nothing, while the other groups go on."""
    try:
        yield Wait([], timeout_s=seconds)
    except WaitTimeout:
        pass


def blocking(steps: Steps[T]) -> T:
    """Run a group's steps here and now, each Wait waited for in turn with its own bound:
    where nothing else may run meanwhile (a group closing after the run was interrupted)."""
    try:
        return _finish(steps, next(steps))
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]


def finishing(steps: Steps[T]) -> Steps[T]:
    """`steps` as steps of the group's work, finished here and now (`blocking`) if the work is
    closed meanwhile (the run is stopping): a server's stop is never left half done."""
    try:
        wait = next(steps)
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]
    while True:
        try:
            yield wait
        except WaitTimeout:
            timed_out = True
        except GeneratorExit:
            _finish(steps, wait)
            raise
        else:
            timed_out = False
        try:
            wait = steps.throw(WaitTimeout()) if timed_out else steps.send(None)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]


def _finish(steps: Steps[T], wait: Wait) -> T:
    """Wait for `wait` here and now, then for the rest of `steps` likewise; their result."""
    try:
        while True:
            if not wait.refs:
                time.sleep(wait.timeout_s or 0.0)
                wait = steps.throw(WaitTimeout())
                continue
            ready, _ = ray.wait(wait.refs, num_returns=len(wait.refs), timeout=wait.timeout_s)
            wait = steps.send(None) if len(ready) == len(wait.refs) else \
                steps.throw(WaitTimeout())
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]
