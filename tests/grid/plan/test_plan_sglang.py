"""Every shipped sweep's server commands pass SGLang's own parser, and a typo is rejected by
name before anything starts. Needs the validation environment (scripts/validate_sglang_venv.sh,
run by .ci/run); SPECGRID_SGLANG_PYTHON points at its Python."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grid.run import CONF_DIR, EXIT_BAD_INPUT, make_plan, run

SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(":")[0]
pytestmark = pytest.mark.skipif(
    not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set (no SGLang parser here)")
SWEEPS = sorted(p.stem for p in (CONF_DIR / "sweep").glob("*.yaml")
                if p.stem not in ("cpu_engines", "cpu_lesson", "cpu_twin",
                                  "cpu_breakeven"))
"""The sweeps that take any engine (cpu_engines sweeps the engines itself, cpu_lesson,
cpu_twin and cpu_breakeven are vLLM's with the trained models: tested below)."""


@pytest.mark.parametrize("sweep", SWEEPS)
@pytest.mark.parametrize("engine", ["sim", "sglang"])
def test_shipped_sweep_passes_sglang_parser(sweep, engine, tmp_path):
    overrides = [f"+sweep={sweep}", f"engine={engine}", f"results_dir={tmp_path}",
                 f"engine.validate_python={SGLANG_PYTHON}", "cluster.num_gpus=8"]
    if engine == "sglang":
        # no override for the simulator's clock: a sweep sets run.sim_time_scale, which only
        # the simulator reads (conf/engine/sim.yaml)
        overrides += [f"engine.python={SGLANG_PYTHON}", "model=llama3.1-8b"]
    plan = make_plan(overrides).plan
    assert plan.validation.startswith("server flags validated by SGLang")
    if engine == "sglang":
        spec = plan.launches[plan.groups[0].server_key]
        assert Path(spec.argv[0]).name == "sglang" and spec.argv[1] == "serve"
        assert "--nccl-port" in spec.extra_port_flags


@pytest.mark.skipif(not os.environ.get("SPECGRID_VLLM_PYTHON"),
                    reason="SPECGRID_VLLM_PYTHON is not set (no vLLM parser here)")
def test_cpu_engines_sweep_passes_sglangs_and_vllms_own_parsers(tmp_path):
    plan = make_plan(["+sweep=cpu_engines", f"results_dir={tmp_path}"]).plan
    assert "SGLang 0.5.23's own parser (1 commands)" in plan.validation, plan.validation
    assert "vLLM 0.32.0's own parser (4 commands)" in plan.validation, plan.validation


@pytest.mark.skipif(not os.environ.get("SPECGRID_VLLM_PYTHON"),
                    reason="SPECGRID_VLLM_PYTHON is not set (no vLLM parser here)")
def test_cpu_lesson_sweep_passes_vllms_own_parser(tmp_path):
    plan = make_plan(["+sweep=cpu_lesson", f"results_dir={tmp_path}"]).plan
    assert "vLLM 0.32.0's own parser (2 commands)" in plan.validation, plan.validation
    draft = plan.launches[plan.groups[1].server_key].argv
    assert draft[draft.index("--per-request-spec-decode-metrics") + 1] == "summary"


def test_cpu_twin_sweep_passes_vllms_own_parser(tmp_path):
    # the baseline and the draft model (4 tokens per step), on the cpu hardware profile: 2
    # variants x 2 output lengths x 4 loads x 2 repeats
    planned = make_plan(["+sweep=cpu_twin", f"results_dir={tmp_path}"])
    plan = planned.plan
    assert "vLLM 0.32.0's own parser (2 commands)" in plan.validation, plan.validation
    assert len(plan.cells) == 32
    assert {c.config["hardware"]["name"] for c in plan.cells} == {"cpu"}


@pytest.mark.skipif(not os.environ.get("SPECGRID_VLLM_PYTHON"),
                    reason="SPECGRID_VLLM_PYTHON is not set (no vLLM parser here)")
def test_cpu_breakeven_sweep_passes_vllms_own_parser(tmp_path):
    # the speculation question: the baseline, its own drafter (the 0.20 rung) and the four
    # other rungs (grid.search.drafters), each its own draft model folder, at loads 1 2 4
    plan = make_plan(["+sweep=cpu_breakeven", f"results_dir={tmp_path}"]).plan
    assert "vLLM 0.32.0's own parser (6 commands)" in plan.validation, plan.validation
    assert len(plan.cells) == 3 * 6
    drafts = sorted(json.loads(spec.argv[spec.argv.index("--speculative-config") + 1])["model"]
                    .rsplit("/", 1)[-1] for spec in plan.launches.values()
                    if "--speculative-config" in spec.argv)
    assert drafts == ["noise-0.00", "noise-0.10", "noise-0.20", "noise-0.35", "noise-0.60"]


def test_typo_in_variant_args_is_rejected_by_name(tmp_path, capsys):
    outcome = run(["+sweep=smoke", f"engine.validate_python={SGLANG_PYTHON}",
                   "++variant.args.speculative_num_stepz=3", f"results_dir={tmp_path / 'r'}"],
                  echo=lambda line: None)
    err = capsys.readouterr().err.strip()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert "variant baseline" in err and "--speculative-num-stepz" in err
    assert not (tmp_path / "r").exists()
