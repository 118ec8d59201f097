"""Bad input fails in the plan: one line naming the problem, non-zero exit, no results folder,
no Ray. These compose real Hydra configs from conf/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grid.run import EXIT_BAD_INPUT, make_plan, run

BAD_INPUTS = [
    (["+sweep=nosuch"], "Could not find 'sweep/nosuch'"),
    (["+sweep=smoke", "grid.axes.variant=[baseline,nosuch]"], "Could not find 'variant/nosuch'"),
    (["+sweep=smoke", "load.clients=abc"], "could not be converted to Integer"),
    (["+sweep=smoke", "variant.bogus=1"], "Key 'bogus' not in 'VariantConfig'"),
    (["+sweep=smoke", "grid.axes.concurrency=[0,4]"], "concurrency must be positive"),
    (["+sweep=smoke", "grid.axes.concurrency=[]"], "the grid has no cells"),
    (["+sweep=smoke", "grid.exclude=[{concurrency:[1,4]}]"], "the grid has no cells"),
    (["+sweep=smoke", "variant.tp_size=16"], "needs 16 GPUs but the cluster has 8"),
    (["+sweep=smoke", "engine.name=tgi"],
     "engine.name='tgi' is not one of external, sglang, sim, vllm"),
    (["+sweep=smoke", "engine=vllm", "cluster.num_gpus=0"],
     "variant baseline needs 1 GPUs but the cluster has 0"),
    (["+sweep=smoke", "workload.endpoint=grpc"], "workload.endpoint='grpc' is not one of"),
    (["+sweep=smoke", "engine=external"], "engine=external needs engine.url"),
    (["+sweep=smoke", "engine=external", "engine.url=http://127.0.0.1:9"],
     "needs 2 distinct server configurations"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS)
def test_bad_input_is_one_clear_line(overrides, message, tmp_path, capsys):
    results = tmp_path / "results"
    outcome = run([*overrides, f"results_dir={results}"], echo=lambda line: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and err[0].startswith("specgrid: error: ")
    assert message in err[0]
    assert not results.exists()


def test_cli_bad_input_exits_nonzero_before_ray(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "grid.run", "+sweep=smoke", "variant=nosuch",
         f"results_dir={tmp_path / 'r'}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stderr.strip().startswith("specgrid: error: In 'config': Could not find")
    assert not (tmp_path / "r").exists()


def test_smoke_plan_has_two_servers_and_four_cells(tmp_path):
    planned = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"])
    plan = planned.plan
    assert len(plan.cells) == 4
    assert [g.variant for g in plan.groups] == ["baseline", "eagle3"]
    spec = plan.launches[plan.groups[1].server_key]
    assert "--speculative-algorithm" in spec.argv and "EAGLE3" in spec.argv
    assert plan.run_dir.parent == tmp_path


def test_axis_override_on_command_line(tmp_path):
    plan = make_plan(["+sweep=smoke", "grid.axes.concurrency=[1,2,8]",
                      f"results_dir={tmp_path}"]).plan
    assert sorted({c.concurrency for c in plan.cells}) == [1, 2, 8]


def test_run_id_is_stable_and_overridable(tmp_path):
    a = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"]).plan.run_id
    b = make_plan(["+sweep=smoke", "grid.axes.concurrency=[1]", f"results_dir={tmp_path}"])
    assert a == b.plan.run_id  # same sweep, engine and model: the same run folder
    c = make_plan(["+sweep=smoke", "run.id=mine", f"results_dir={tmp_path}"]).plan
    assert c.run_dir == tmp_path / "mine"


def test_plan_prints_commands_without_starting_anything(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "plan=true", f"results_dir={tmp_path / 'r'}"],
                  echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0
    assert "command:" in text and "--speculative-num-steps 3" in text
    assert "estimate:" in text
    assert not (tmp_path / "r").exists()
