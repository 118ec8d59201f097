"""Bad input fails in the plan: one line naming the problem, non-zero exit, no results folder,
no Ray. These compose real Hydra configs from conf/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grid.run import EXIT_BAD_INPUT, make_plan, run
from tests.grid.plan.bad_input import assert_bad_input

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
    (["+sweep=smoke", "engine=vllm", "cluster.num_gpus=0", "workload.endpoint=chat"],
     "variant baseline needs 1 GPUs but the cluster has 0"),
    (["+sweep=smoke", "engine=vllm", "cluster.num_gpus=8"],
     "variant baseline: vLLM serves no native /generate (SGLang's): use workload.endpoint=chat"),
    (["+sweep=smoke", "workload.endpoint=grpc"], "workload.endpoint='grpc' is not one of"),
    (["+sweep=smoke", "engine=external"], "engine.options.url must be set: the base URL"),
    (["+sweep=smoke", "engine=external", "engine.options.url=http://127.0.0.1:9"],
     "needs 2 distinct server configurations"),
    # values that cannot be meant (grid/plan/choices.py _RANGES, an engine's own options:
    # engines/sim/options.py; docs/checks.md)
    *[(["+sweep=smoke", f"{key}={value}"], f"{key} must be {rule}, got {value}")
      for key, value, rule in [
          ("slo.ttft_ms", -1, "> 0"), ("slo.tpot_ms", 0, "> 0"), ("slo.e2e_ms", -5.5, "> 0"),
          ("engine.options.error_rate", 2, "within [0, 1]"),
          ("engine.options.malformed_rate", -0.1, "within [0, 1]"),
          ("engine.options.time_scale", -1, ">= 0"),
          ("engine.options.startup_seconds", -2, ">= 0"),
          ("engine.options.crash_after_requests", -1, ">= 0"),
          ("engine.options.hang_after_requests", -1, ">= 0"),
          ("engine.ready_timeout_s", 0, "> 0"), ("engine.stop_timeout_s", -1, "> 0"),
          ("model.tp_size", 0, ">= 1"), ("variant.tp_size", 0, ">= 1"),
          ("variant.speculative_disable_above_batch", 0, ">= 1"),
          ("workload.max_new_tokens", 0, ">= 1"), ("workload.temperature", -0.5, ">= 0"),
          ("workload.max_turns", 0, ">= 1"), ("workload.think_time_s", -1, ">= 0"),
          ("workload.time_scale", 0, "> 0"),
          ("load.max_in_flight", 0, ">= 1"), ("load.burstiness", -1, "> 0"),
          ("load.requests_per_stream", 0, "> 0"), ("load.min_requests", 0, ">= 1"),
          ("load.duration_s", 0, "> 0"), ("load.warmup_requests", -1, ">= 0"),
          ("load.request_timeout_s", -3, "> 0"),
          ("run.max_error_rate", 1.5, "within [0, 1]"),
          ("run.max_error_rate", -0.1, "within [0, 1]"),
          ("run.metrics_interval_s", 0, "> 0"), ("run.telemetry_interval_s", -1, "> 0"),
          ("run.cell_timeout_s", 0, "> 0"), ("run.cell_timeout_s", -30, "> 0"),
          ("cluster.num_gpus", -1, ">= 0"), ("cluster.num_cpus", 0, ">= 1"),
          ("hardware.gpu_hour_usd", -1, "> 0"), ("hardware.gpu_hour_usd", 0, "> 0")]],
    (["+sweep=smoke", "engine.options.error_rate=lots"],
     "engine.options.error_rate must be a number within [0, 1], got 'lots'"),
    (["+sweep=smoke", "workload.temperature=0,-1"], "workload.temperature must be >= 0, got -1"),
    (["+sweep=smoke", "load.repeat=0,-1"], "load.repeat must be >= 0, got -1"),  # swept
    (["+sweep=smoke", "run.max_error_rate=nan"], "run.max_error_rate must be within [0, 1]"),
    (["+sweep=smoke", "slo.ttft_ms=-1"], "specgrid: error: slo.ttft_ms must be > 0, got -1"),
    (["+sweep=smoke", "hardware.gpu_hour_usd=-1"],
     "specgrid: error: hardware.gpu_hour_usd must be > 0, got -1"),
    # a price is not measured: as an axis its cells would share one id
    (["+sweep=smoke", "grid.include=[{variant:eagle3,hardware.gpu_hour_usd:1}]"],
     "grid axis hardware.gpu_hour_usd: hardware.gpu_hour_usd changes how a run is operated"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS)
def test_bad_input_is_one_clear_line(overrides, message, tmp_path, capsys):
    assert_bad_input(overrides, message, tmp_path / "results", capsys)


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
