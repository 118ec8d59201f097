"""Every wait of the controller has a bound (grid/execute/controller.py): the steps a group's
work yields, driven by hand as the controller's loop would (no Ray)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from grid.execute.controller import GroupRun, LoadTimeout
from grid.execute.server import WaitTimeout


def test_a_load_that_never_returns_fails_its_cell_within_its_bound() -> None:
    run = SimpleNamespace(ctl=SimpleNamespace(progress=None))
    steps = GroupRun._wait_reporting(run, ["never-ready"], [], bound_s=0.2)  # type: ignore[arg-type]
    wait = next(steps)
    assert wait.refs == ["never-ready"] and wait.timeout_s == pytest.approx(0.2, abs=0.05)
    time.sleep(0.25)  # the controller throws WaitTimeout once the wait's timeout passed
    with pytest.raises(LoadTimeout, match="did not finish within 0 s"):
        steps.throw(WaitTimeout())


def test_the_bound_follows_the_plans_estimate_and_the_request_timeout() -> None:
    cell = SimpleNamespace(config={"load": {"request_timeout_s": 30.0}})
    run = SimpleNamespace(ctl=SimpleNamespace(plan=SimpleNamespace(cell_seconds=lambda c: 5.0)))
    assert GroupRun._load_bound_s(run, cell) == 10 * 5.0 + 30.0 + 60.0  # type: ignore[arg-type]
