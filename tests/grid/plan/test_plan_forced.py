"""Forced acceptance in the plan (grid/plan/specs.py, engines/forced.py): each engine's form in
the planned server, and every refusal as one line, exit 2, before anything starts. These compose
real Hydra configs from conf/."""

from __future__ import annotations

import json
import sys

import pytest

from engines.tiny_models import model_dir
from grid.plan.cells import identity
from grid.run import make_plan
from tests.grid.plan.bad_input import assert_bad_input

FORCED = ["variant=eagle3", "variant.forced_acceptance.length=2.5"]


@pytest.mark.parametrize(("overrides", "message"), [
    (["variant=baseline", "variant.forced_acceptance.length=2"],
     "variant baseline on simulated SGLang: forced_acceptance needs a speculative variant"),
    (["variant=eagle3", "variant.forced_acceptance.length=4.5"],
     "forced_acceptance.length must be in [1, 4] (k = speculative_num_steps = 3), got 4.5"),
    (["variant=eagle3", "variant.forced_acceptance.rates=[0.5,0.6,0.4]"],
     "forced_acceptance.rates must not increase"),
    (["variant=eagle3", "engine=external", "engine.options.url=http://127.0.0.1:9", *FORCED[1:]],
     "variant eagle3: forced_acceptance needs a server specgrid launches"),
    (["engine=sglang", "variant=eagle3", "variant.forced_acceptance.rates=[0.8,0.6,0.4]",
      "engine.validate_python=null", "cluster.num_gpus=8"],
     "SGLang forces a mean accept length only"),
    # The tiny models must exist for the plan to reach vLLM's refusal (it refuses a missing
    # model first): on a machine without them this case says how to build them.
    pytest.param(["engine=vllm", "engine.device=cpu", f"engine.python={sys.executable}",
                  "engine.version=0.32.0", "model=tiny", "variant=tiny_draft_near",
                  "workload.endpoint=chat", *FORCED[1:]],
                 "Synthetic acceptance not supported with CPU sampling",
                 marks=pytest.mark.skipif(
                     not model_dir("target").is_dir(),
                     reason="needs the tiny models: bash scripts/engine_envs.sh --one && "
                            ".venv-engines/bin/python scripts/tiny_models.py")),
])
def test_forced_acceptance_that_cannot_work_is_one_line(overrides, message, tmp_path, capsys):
    assert_bad_input(overrides, message, tmp_path / "results", capsys)


def test_each_forced_length_is_a_cell_of_its_own_with_the_simulators_form(tmp_path):
    plan = make_plan(["variant=eagle3", "variant.forced_acceptance.length=1.5,3",
                      f"results_dir={tmp_path}"]).plan
    assert sorted(c.variant for c in plan.cells) == ["eagle3__forced_len-1.5",
                                                     "eagle3__forced_len-3"]
    envs = sorted(plan.launches[g.server_key].env["SGLANG_SIMULATE_ACC_LEN"]
                  for g in plan.groups)
    assert envs == ["1.5", "3.0"]


def test_unforced_cells_keep_their_ids(tmp_path):
    a = make_plan(["variant=eagle3", f"results_dir={tmp_path}"]).plan.cells[0]
    b = make_plan(["variant=eagle3", "variant.forced_acceptance.length=null",
                   f"results_dir={tmp_path}"]).plan.cells[0]
    c = make_plan([*FORCED, f"results_dir={tmp_path}"]).plan.cells[0]
    assert a.cell_id == b.cell_id != c.cell_id
    assert "forced_acceptance" not in json.dumps(identity(a.config, a.prompts_digest))
