"""A twin of a real engine (docs/twin.md): real vLLM 0.32.0 on this machine's CPU serves the
trained target, baseline and with its trained draft model (`+sweep=cpu_twin`, fewer requests),
and `python -m grid.twin` fits the simulator to those cells: the node from the run itself (the
`cpu` hardware profile, the model's shapes from the served folder's config.json, the draft
model's from --speculative-config), per-position acceptance from vLLM's own counters, and a
held-out load predicted by a fit that never saw it.

How close the prediction is (the ±10 % goal) is measured by bench/twin_cpu.py, with its numbers
in docs/results.md: a timed figure on a shared 2-core machine is no test. This checks that a real
engine's run can be fitted and judged end to end.

Marked `real_engine`; .ci/run builds the engines and trains the models."""

from __future__ import annotations

import json

import pytest

from engines.sim.profile import load_profile
from grid.loader import load_cells
from grid.run import run
from grid.twin import TWIN_FILE, main

pytestmark = [pytest.mark.real_engine, pytest.mark.usefixtures("ray_session"),
              pytest.mark.timeout(900)]


def test_a_twin_of_real_vllm_is_fitted_and_judged_on_a_held_out_load(
        tmp_path, engines_python, trained_models, capsys):
    lines: list[str] = []
    outcome = run(["+sweep=cpu_twin", f"results_dir={tmp_path}",
                   f"engine.python={engines_python}", "grid.axes.concurrency=[1,2,4]",
                   "grid.axes.repeat=[0]", "load.requests_per_stream=4", "load.min_requests=8"],
                  echo=lines.append)
    log = "\n".join(lines)
    assert outcome.exit_code == 0, log
    cells = load_cells(outcome.run_dir)
    assert len(cells) == 12 and (cells.status == "done").all(), log
    assert set(cells.source) == {"real engine, CPU, tiny trained models"}
    capsys.readouterr()

    # --saturated: on 2 cores the load generator shares the machine with the engine
    assert main([str(outcome.run_dir), "--holdout", "2", "--saturated",
                 "--replicates", "3"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    print(out)
    doc = json.loads((outcome.run_dir / TWIN_FILE).read_text())
    twin = doc["twin"]
    # the node, from the run alone: the CPU profile, the trained models' own config.json
    # (engines/trained_models.py TRAIN_RECIPE: 4 layers of 128, a 1-layer draft model)
    assert twin["node"] == {"hardware": "cpu", "model": "tiny_trained"}
    model = doc["model"]
    assert (model["layers"], model["hidden"], model["heads"], model["kv_heads"]) == (4, 128, 4, 2)
    assert model["draft_layers"] == 1 and 0 < model["draft_params_b"] < model["dense_params_b"]
    # vLLM counts acceptance per draft position: each of the drafter's 4 positions is fitted
    assert {f"accept_p{i}:agentic" for i in (1, 2, 3, 4)} <= set(twin["factors"])
    assert sorted(twin["cells"]) == sorted(cells.cell_id)
    # the split: loads 1 and 4 fitted, load 2 predicted (both variants, both output lengths)
    split = twin["holdout_split"]
    assert split["held_out"] == [2] and split["fitted_on"] == [1, 4]
    tok = [r for r in split["cells"] if r["metric"] == "output_tok_s"]
    assert len(tok) == 4 and not any(r["extrapolation"] for r in tok)
    assert len([r for r in split["cells"] if r["metric"] == "speedup"]) == 2
    assert ("held-out loads 2 predicted from a fit on loads 1, 4 of "
            "agentic__max_new_tokens-32, agentic__max_new_tokens-96:") in out
    # the twin is a simulator profile of this node, labelled as the twin of this run
    prof = load_profile(str(outcome.run_dir / TWIN_FILE), "cpu", "tiny_trained")
    assert prof.data["twin"]["run_id"] == outcome.run_dir.name
