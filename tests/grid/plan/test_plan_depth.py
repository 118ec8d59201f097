"""A depth schedule (`variant.speculative_depth`) and the engine's own adaptation
(`variant.speculative_adaptive`) in the plan: bad input is one line and exit 2 before anything
starts; cells that set neither keep the ids they had before the keys existed; a schedule's
server is planned in the engine's own form with its effective tiers in the plan."""

from __future__ import annotations

import pytest

from grid.plan.cells import make_cell
from grid.run import make_plan
from tests.grid.plan.bad_input import assert_bad_input
from tests.grid.plan.test_cells import _config

ONE = ["variant=eagle3", "load.concurrency=4"]


@pytest.mark.parametrize(("overrides", "message"), [
    (["variant.speculative_depth=[[2,5]]"], "speculative_depth must start from batch size 1"),
    (["variant.speculative_depth=[[1,5],[9,3],[5,1]]"], "ascending by batch size: 5 follows 9"),
    (["variant.speculative_depth=[[1,5],[9,-1]]"], "depths must be >= 0"),
    (["variant.speculative_depth=[[1,5]]", "variant.speculative_disable_above_batch=8"],
     "speculative_disable_above_batch and speculative_depth both set the speculative depth"),
    (["variant.speculative_adaptive=true", "engine=vllm", "workload.endpoint=chat",
      "cluster.num_gpus=8"],
     "vLLM 0.32.0 has no runtime adaptation"),
    (["variant.speculative_adaptive=true", "variant.args.speculative_eagle_topk=4"],
     "speculative_adaptive needs speculative_eagle_topk 1"),
    (["variant.speculative_adaptive=true", "variant.args.speculative_algorithm=NGRAM"],
     "speculative_adaptive needs speculative_algorithm EAGLE or EAGLE3"),
    (["variant=baseline", "variant.speculative_depth=[[1,3]]"],
     "speculative_depth needs speculative_algorithm EAGLE or EAGLE3"),
    (["variant.speculative_depth=[[1,3]]", "engine=external", "engine.options.url=http://h:1"],
     "speculative_depth needs a server specgrid launches"),
])
def test_bad_depth_settings_are_one_line_before_anything_starts(overrides, message, tmp_path,
                                                                 capsys):
    assert_bad_input([*ONE, *overrides], message, tmp_path / "r", capsys)


def test_cells_without_the_new_keys_keep_their_ids():
    old = _config("eagle3")
    new = _config("eagle3")
    new["variant"].update(speculative_depth=None, speculative_adaptive=False,
                          speculative_adaptive_config=None)
    a, b = (make_cell({"concurrency": 1}, c, "d", "v") for c in (old, new))
    assert (a.cell_id, a.server_key) == (b.cell_id, b.server_key)
    new["variant"]["speculative_depth"] = [[1, 5], [9, 0]]
    c = make_cell({"concurrency": 1, "variant.speculative_depth": [[1, 5], [9, 0]]}, new, "d",
                  "v")
    assert c.cell_id != a.cell_id and c.server_key != a.server_key
    assert c.variant == "eagle3__depth-1_5_9_0"


def test_a_schedule_is_planned_in_the_engines_form(tmp_path):
    planned = make_plan([*ONE, "variant.speculative_depth=[[1,5],[10,3],[33,0]]",
                         f"results_dir={tmp_path}"])
    spec = next(iter(planned.plan.launches.values()))
    argv = spec.argv
    assert argv[argv.index("--speculative-num-steps") + 1] == "5"
    assert "--speculative-adaptive" in argv
    (name, text), = spec.files.items()
    assert text.strip() == ('{"1":{"candidate_steps":[5]},"10":{"candidate_steps":[3]},'
                            '"33":{"candidate_steps":[0]}}')
    # The tier from 10 starts at batch 9 on a speculative server (9 pads to 10).
    assert any("1-8: 5, 9-32: 3, 33+: 0" in w for w in planned.plan.warnings)
    assert any("tier from batch 10 starts at batch 9" in w for w in planned.plan.warnings)
