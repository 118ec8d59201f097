"""The plan's break-even prediction for an earlier run's drafter (grid/plan/breakeven_predict.py,
`breakeven.drafter_run`): real Hydra plans, the engine's estimate (or a twin) replaced by a
hand-worked one, and every refusal one line and exit 2 before anything starts."""

from __future__ import annotations

import json

import pytest

import grid.plan.breakeven_predict as predict
from grid.run import make_plan, run
from grid.store.drafter_run import read_drafter_run
from tests.grid.analysis.synthetic import write_speculative_cells
from tests.grid.plan.bad_input import assert_bad_input

GRID = ["variant=baseline,eagle3", "load.concurrency=1,8,32"]
K = {1: 1.2, 8: 2.0, 32: 5.0}
"""The hand-worked model: at concurrency c the configuration at forced length a makes a / K[c]
of the baseline's tok/s, so the break-even length is K[c]: 1.2 and 2.0 inside the default
lengths (1 to 4 in steps of 0.375), 5.0 beyond 4."""


class Model:
    """An engine's estimate: 10 s for the baseline's cell, 10 K[c] / a for the forced one."""

    def estimate_cell_seconds(self, work) -> float:
        if work.config["variant"]["name"] == "baseline":
            return 10.0
        return 10.0 * K[work.concurrency] / work.config["variant"]["forced_acceptance"]["length"]

    def provenance(self, options) -> str | None:
        return None


@pytest.fixture
def old(tmp_path):
    path = tmp_path / "results" / "old"
    # coding 60 / 20 = 3.0 over 4 requests, chat 30 / 20 = 1.5 over 2
    write_speculative_cells(path, {"u1": ("eagle3", None, [("coding", 61, 20)] * 4
                                          + [("chat", 31, 20)] * 2)})
    return path


def _lines(planned, old) -> list[str]:
    assert planned.workloads is not None
    return predict.prediction_lines(planned.cfg, planned.plan.cells, planned.workloads,
                                    read_drafter_run(old, "breakeven.drafter_run"))


EXPECTED = [
    "  break-even length: c=1 1.20, c=8 2.00, c=32 >= 4.00",
    "  chat: accept length 1.50 [1.50, 1.50] over 2 requests: predicted: pays up to c=1",
    "  coding: accept length 3.00 [3.00, 3.00] over 4 requests: predicted: pays up to c=8"]


def test_the_engines_estimate_predicts_where_each_domain_pays(tmp_path, old, monkeypatch):
    planned = make_plan([*GRID, f"breakeven.drafter_run={old}", f"results_dir={tmp_path}"])
    assert planned.drafter_run is not None and planned.drafter_run.run_id == "old"
    monkeypatch.setattr(predict.engines, "modeller", lambda name: Model())
    assert _lines(planned, old) == [
        "break-even of eagle3 vs baseline on coding, the drafter's accept length from run old "
        "(eagle3) [predicted, SIMULATION, before any server starts]:", *EXPECTED]


def test_a_twin_given_as_the_prior_predicts_instead(tmp_path, old, monkeypatch):
    planned = make_plan([*GRID, f"results_dir={tmp_path}", "grid.search.prior=twin.json"])
    asked = []

    def ask_twin(path, base, variant, loads, workloads):
        a = variant.config["variant"]["forced_acceptance"]["length"]
        asked.append((path, a))
        return path, "SIMULATION (twin of old)", tuple(a / K[c] - 1.0 for c in loads)

    monkeypatch.setattr(predict, "ask_twin", ask_twin)
    lines = _lines(planned, old)
    assert lines[0].endswith("[predicted, SIMULATION (twin of old), before any server starts]:")
    assert lines[1:] == EXPECTED
    assert [a for _, a in asked] == [1.0, 1.375, 1.75, 2.125, 2.5, 2.875, 3.25, 3.625, 4.0]


def test_a_real_engine_without_a_twin_predicts_nothing_and_says_so(tmp_path, old, capsys):
    outcome = run([*GRID, "engine=sglang", f"breakeven.drafter_run={old}", "plan=true",
                   f"results_dir={tmp_path}"], echo=print)
    assert outcome.exit_code == 0
    out = capsys.readouterr().out.splitlines()
    i = out.index("break-even of eagle3 vs baseline on coding, the drafter's accept length from "
                  "run old (eagle3): no prediction possible (engine sglang has no model of its "
                  "speed before measuring; grid.search.prior=TWIN gives one)")
    assert out[i + 1:i + 3] == ["  chat: accept length 1.50 [1.50, 1.50] over 2 requests",
                                "  coding: accept length 3.00 [3.00, 3.00] over 4 requests"]


def test_the_simulators_plan_prints_its_prediction(tmp_path, old, capsys):
    assert run([*GRID, f"breakeven.drafter_run={old}", "plan=true",
                f"results_dir={tmp_path}"], echo=print).exit_code == 0
    out = capsys.readouterr().out
    assert ("the drafter's accept length from run old (eagle3) [predicted, SIMULATION, before "
            "any server starts]:") in out
    assert "  coding: accept length 3.00 [3.00, 3.00] over 4 requests: predicted: " in out


def test_bad_drafter_runs_are_one_line_before_anything_starts(tmp_path, capsys):
    results = tmp_path / "results"
    old = tmp_path / "old"
    assert_bad_input([*GRID, f"breakeven.drafter_run={old}"],
                     f"breakeven.drafter_run={old}: {old} is not a run folder", results, capsys)
    write_speculative_cells(old, {"b": ("baseline", None, [("coding", 61, 0)])})
    assert_bad_input([*GRID, f"breakeven.drafter_run={old}"],
                     "run old has no unforced speculative cell", results, capsys)
    write_speculative_cells(old, {"a": ("eagle3a", None, [("coding", 61, 20)]),
                                  "c": ("eagle3c", None, [("coding", 61, 20)])})
    assert_bad_input([*GRID, f"breakeven.drafter_run={old}"],
                     "drafter run old has no configuration 'eagle3' and several others "
                     "(eagle3a, eagle3c)", results, capsys)
    # eagle3 measured at depth 5 (its cells' server_args); the plan's eagle3 drafts 3 per step
    # (conf/variant/eagle3.yaml speculative_num_steps)
    depth5 = tmp_path / "depth5"
    write_speculative_cells(depth5, {"u": ("eagle3", None, [("coding", 61, 20)])},
                            cell_fields={"server_args": json.dumps(
                                {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5})})
    assert_bad_input([*GRID, f"breakeven.drafter_run={depth5}"],
                     "drafter run depth5 measured eagle3 at depth 5 (speculative_num_steps), "
                     "eagle3 here is at depth 3: an accept length does not carry over to "
                     "another depth; give a run measured at depth 3", results, capsys)
