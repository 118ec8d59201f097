"""twin.json round trip: the twin's profile, loaded by the simulator, reproduces the
predictions the fit printed, serves them through the simulator's own scheduler, and keeps its
fitted node, envelope and run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engines
from engines.sim.calibrate import closed_loop, coding_prompt, make_engine, spec_argv
from engines.sim.profile import load_profile, twin_of
from engines.sim.twin import synthetic
from engines.sim.twin.analytic import Scenario, Setup, predict
from engines.sim.twin.cells import observe
from engines.sim.twin.fit import figures
from tests.engines.sim.twin.ground_truth import CHAINS, truth

NODE = ("h200", "llama3.1-8b")
EAGLE3 = spec_argv({"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                    "speculative_num_draft_tokens": 4})


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> tuple[Path, dict, list]:
    cells = synthetic.cells(truth(), [1, 64], noise=0.0, per_position=True)
    doc = engines.twin_modeller().fit_twin(cells, run_id="RUN", hardware=NODE[0], model=NODE[1],
                                      start="default", replicates=0)
    path = tmp_path_factory.mktemp("twin") / "twin.json"
    path.write_text(json.dumps(doc))
    return path, doc, cells


def test_the_loaded_profile_reproduces_the_fitted_predictions(twin):
    path, doc, cells = twin
    setup = Setup.from_profile(load_profile(str(path), *NODE))
    by_cell = {c.cell_id: figures(predict(setup, observe(c).scenario)) for c in cells}
    rows = [r for r in doc["twin"]["fit"] if r["metric"] != "speedup"]
    assert len(rows) == 14  # 4 cells x 3 figures + accept length of the 2 speculative ones
    for r in rows:
        assert by_cell[r["cell_id"]][r["metric"]] == pytest.approx(r["predicted"], rel=1e-12)


def test_the_simulator_serves_the_twin(twin):
    path, _, _ = twin
    profile = load_profile(str(path), *NODE)
    setup = Setup.from_profile(profile)
    argv = ["--sim-profile", str(path), "--sim-hardware", NODE[0], "--sim-model", NODE[1],
            "--max-running-requests", "256"]
    for spec, flags, tolerance in ((None, [], 0.005), ((3, 1, 4), EAGLE3, 0.05)):
        served = closed_loop(profile, [*argv, *flags], 8, 128, 256, requests_per_stream=4)
        twin_says = predict(setup, Scenario(8, 128, 256, spec, max_running=256,
                                            domains=(("coding", 1.0),)))
        # a baseline wave is what the closed form assumes; a speculative one drifts apart
        assert served.output_tok_s == pytest.approx(twin_says.output_tok_s, rel=tolerance)


def test_a_request_on_the_twin_accepts_as_its_domain_s_fitted_chain(twin):
    path, doc, _ = twin
    engine = make_engine(load_profile(str(path), *NODE), ["--sim-profile", str(path), *EAGLE3])
    assert engine.drafter is None  # no alignment-based drafter: the twin's chains
    text = coding_prompt(0)
    req = engine.new_request(prompt_text=text, prompt_tokens=len(text) // 4,
                             max_new_tokens=16, temperature=0.0, rid="r")
    assert req.domain == "coding"
    # the generating chain, recovered by the fit: 0.84, 0.82, 0.81
    assert list(req.probs[:3]) == pytest.approx(CHAINS["coding"][:3], abs=1e-4)


def test_the_twin_names_its_node_run_and_envelope(twin):
    path, _, _ = twin
    assert twin_of(str(path)) == "RUN"
    with pytest.raises(ValueError, match="fitted on hardware 'h200'.*hardware=h200"):
        load_profile(str(path), "h100", NODE[1])
    env = load_profile(str(path), *NODE).envelope
    assert env is not None and env.anchor == "twin of RUN"
    assert env.concurrency == (1, 64) and env.speculative == ((3, 1, 4),)
    inside = dict(output_tokens=256, prompt_tokens=(128, 128), speculative=(3, 1, 4),
                  domains=["coding"])
    assert env.outside(concurrency=32, **inside) == []
    assert env.outside(concurrency=256, **inside) == ["concurrency 256 outside 1-64"]
