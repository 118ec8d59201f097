"""End to end: a twin fitted by `python -m grid.twin` serves a sweep through real simulator
processes, and every place that names the numbers' source says whose twin it is."""

from __future__ import annotations

import json

import pytest

from engines.sim.twin import synthetic
from grid.loader import load_cells
from grid.run import run
from grid.twin import TWIN_FILE, main
from tests.engines.sim.twin.ground_truth import truth
from tests.grid.twin_run import write_run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]


def test_a_sweep_on_a_twin_is_labelled_with_its_run(tmp_path):
    measured = tmp_path / "MEASURED"
    write_run(measured, synthetic.cells(truth(), [1, 64], noise=0.01))
    assert main([str(measured), "--replicates", "2"]) == 0
    lines: list[str] = []
    outcome = run(["+sweep=smoke", f"engine.options.profile={measured / TWIN_FILE}",
                   "hardware=h200", "model=llama3.1-8b", f"results_dir={tmp_path / 'r'}"],
                  echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    cells = load_cells(outcome.run_dir)
    assert len(cells) == 4 and (cells.source == "SIMULATION (twin of MEASURED)").all()
    for info in cells[cells.variant == "eagle3"].server_info:  # the twin's fitted chains
        assert json.loads(info)["sim"]["drafter"] == {"acceptance_by": "domain"}
    decision = json.loads((outcome.run_dir / "decision.json").read_text())
    assert decision["source"] == "SIMULATION (twin of MEASURED)"
    # the smoke sweep's 16 output tokens lie outside the 256 the twin was fitted on
    assert any(v["text"].startswith("extrapolation: 4 simulated cell(s)")
               and "16 output tokens outside 256" in v["text"] for v in decision["validity"])
