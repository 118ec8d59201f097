"""A chat request asks SGLang (and the simulator standing in for it) for its speculative counts,
which SGLang 0.5.23 sends on the OpenAI stream only when asked (engines/sglang/semantics.py
SPEC_DETAILS); other engines and the native /generate get the body as it was."""

from __future__ import annotations

import pytest

from grid.plan.specs import load_specs
from grid.run import make_plan

ASKS = {"return_spec_tokens_details": True}


@pytest.mark.parametrize(("overrides", "extra"), [
    (["workload.endpoint=chat"], ASKS),
    (["workload.endpoint=generate"], {}),
    (["workload.endpoint=chat", "engine=sglang", "cluster.num_gpus=8",
      "engine.validate_python=null"], ASKS),
    (["workload.endpoint=chat", "engine=vllm", "cluster.num_gpus=8",
      "engine.validate_python=null"], {}),
])
def test_the_chat_body_asks_sglang_for_its_speculative_counts(overrides: list[str],
                                                              extra: dict) -> None:
    planned = make_plan(["+sweep=smoke", *overrides])
    cell = planned.plan.cells[0]
    specs = load_specs(cell, planned.plan.prompts[cell.workload_name])
    assert [s.extra_body for s in specs] == [extra] * len(specs)
