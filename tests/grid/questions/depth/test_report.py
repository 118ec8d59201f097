"""A depth search's answer in the engine's words (grid/questions/depth/__init__.py), from a
planned search (DepthPlanned) replayed on constructed
measurements and traced as the run loop traces it (DepthPlanned.trace): the schedule with each
level's evidence, the confirmation, and the setting to paste: SGLang's flags with its adaptive
config file written beside the report, vLLM's --speculative-config JSON."""

from __future__ import annotations

import json

from grid.questions.depth import DepthPlanned, depth_decision, depth_lines, write_depth_files
from grid.questions.depth.confirm import ADAPTIVE, SCHEDULE, replay_all
from grid.run import make_plan
from tests.grid.questions.depth.test_steps import surface

# c in [1, 4]: lattice 1 2 3 4, coarse levels 1 2 4 at depths {0, 1, 3}. Depth 3 is best up to
# c=2, the baseline from c=3: the search opens c=3 between 3 (c=2) and 0 (c=4) and finds 0.
SEARCH = ["+sweep=depth_search", "grid.search.concurrency=[1,4]", "grid.search.depths=[0,1,3]",
          "grid.search.max_repeats=1", "workload.max_new_tokens=16", "load.num_requests=8",
          "hardware=h200", "model=llama3.1-8b"]
VALUES = {1: {0: 100, 1: 110, 3: 150}, 2: {0: 100, 1: 108, 3: 130},
          3: {0: 100, 1: 90, 3: 95}, 4: {0: 100, 1: 85, 3: 80}}


def _setup(overrides: list[str], tmp_path) -> DepthPlanned:
    setup = make_plan([*SEARCH, *overrides, f"results_dir={tmp_path}"]).search
    assert isinstance(setup, DepthPlanned)
    return setup


def _trace(setup: DepthPlanned) -> dict:
    # The schedule's server beats the baseline at c=1 (160 vs 100) and ties it at c=3 (100 vs
    # 100); the adaptation is slower at both.
    servers = {1: {SCHEDULE: 160, ADAPTIVE: 140}, 3: {SCHEDULE: 100, ADAPTIVE: 90}}
    measured = surface({c: {**VALUES[c], **servers.get(c, {})} for c in VALUES}, repeats=1)
    steps = replay_all(setup.space, setup.confirm_cells, setup.adaptive, measured)
    return setup.trace(steps, None)


def test_the_schedule_its_evidence_and_sglangs_files_beside_the_report(tmp_path):
    setup = _setup([], tmp_path)
    trace = _trace(setup)
    res = trace["result"]
    assert res["stop"] == "resolved" and res["schedule"] == [[1, 3], [3, 0]]
    # 3 levels x 3 depths, then c=3 over {0, 1, 3}: 12 cells; confirming at c=1 (tier 1:
    # depth 3 = the best single depth, so against the baseline and the adaptation) and c=3
    # (tier 2: also against depth 3): 4 new cells
    assert res["cells"] == 16 and res["confirm_stop"] == "confirmed"
    assert [t["stands"] for t in res["tiers"]] == [True, True]
    lines = depth_lines(trace)
    assert any("schedule: depth 3 from batch 1, baseline from batch 3" in line
               for line in lines)
    assert any(line.strip().startswith("c=1: depth 3 over depth 1 +36.4%") for line in lines)
    decision = depth_decision(trace)
    assert decision is not None and decision["schedule"] == [[1, 3], [3, 0]]
    setting = decision["setting"]
    # SGLang's adaptive config: one candidate per tier, num_steps the largest depth
    (name, text), = setting["files"].items()
    assert json.loads(text) == {"1": {"candidate_steps": [3]}, "3": {"candidate_steps": [0]}}
    assert "--speculative-adaptive" in setting["flags"] and name in setting["flags"]
    assert setting["flags"][setting["flags"].index("--speculative-num-steps") + 1] == "3"
    # The simulated H200 pads to 1 2 3 4 ...: the tier from 3 starts at 3
    assert setting["tiers"][:2] == [[1, 2, 3], [3, None, 0]]
    written = write_depth_files(tmp_path, trace)
    assert (tmp_path / "depth-schedule" / name).read_text() == text
    assert (tmp_path / "depth-schedule" / "flags.txt") in written


def test_vllms_words_are_its_speculative_config(tmp_path):
    setup = _setup(["engine=vllm", "workload.endpoint=chat", "cluster.num_gpus=8"], tmp_path)
    assert not setup.adaptive  # vLLM has no runtime adaptation: not an alternative
    trace = _trace(setup)
    setting = trace["result"]["setting"]
    assert setting["engine"] == "vllm" and setting["files"] == {}
    flag, spec = setting["flags"]
    # eagle3's max_running_requests is 64: tier 1 is 1..2, tier 2 from 3 to 64
    assert flag == "--speculative-config"
    assert json.loads(spec)["num_speculative_tokens_per_batch_size"] == [[1, 2, 3], [3, 64, 0]]
    assert json.loads(spec)["num_speculative_tokens"] == 3
    assert [t["comparisons"][-1]["against"] for t in trace["result"]["tiers"]] == [
        "baseline", "depth 3"]
