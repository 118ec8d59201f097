"""The default sweep's clock: the simulator at run.sim_time_scale 0.5 (conf/sweep/concurrency.yaml),
its load specs on the modelled clock and a `clock:` line in the plan; a real engine keeps its
own clock with no override (docs/loadgen.md "The modelled clock")."""

from __future__ import annotations

from grid.plan.build import format_plan
from grid.plan.specs import load_specs
from grid.run import make_plan


def test_the_default_sweep_runs_the_simulator_on_a_clock_twice_the_walls() -> None:
    planned = make_plan(["+sweep=concurrency"])
    cells = planned.plan.cells
    assert sorted({c.concurrency for c in cells}) == [1, 2, 4, 8, 16, 32, 64]
    assert {c.config["engine"]["options"]["time_scale"] for c in cells} == {0.5}
    prompts = planned.plan.prompts[cells[0].workload_name]
    assert {s.clock_scale for s in load_specs(cells[0], prompts)} == {0.5}
    assert "clock: modelled at time_scale 0.5, 2x the wall's" in format_plan(planned.plan)


def test_a_real_engine_on_the_default_sweep_keeps_its_own_clock() -> None:
    planned = make_plan(["+sweep=concurrency", "engine=sglang", "cluster.num_gpus=8",
                         "engine.validate_python=null"])
    cell = planned.plan.cells[0]
    assert "time_scale" not in (cell.config["engine"].get("options") or {})
    prompts = planned.plan.prompts[cell.workload_name]
    assert {s.clock_scale for s in load_specs(cell, prompts)} == {1.0}
    assert "clock:" not in format_plan(planned.plan)
