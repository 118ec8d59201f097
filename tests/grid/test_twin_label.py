"""A sweep on a twin is labelled `SIMULATION (twin of RUN)`: in the cells' source, the plan,
the report's banner and figures' label, and decision.json."""

from __future__ import annotations

import json
from pathlib import Path

from engines.sim.profile import HARDWARE_DIR, MODEL_DIR, PROFILE_DIR
from grid.plan.work import source_label
from grid.report import decision_json
from grid.report.data import load_run
from grid.run import make_plan
from tests.grid.analysis.synthetic import write_run
from tests.grid.plan.bad_input import assert_bad_input

TWIN_LABEL = "SIMULATION (twin of RUN7)"


def twin_profile(tmp_path: Path) -> Path:
    """A profile that says it is a twin of run RUN7, made from the shipped files by hand: the
    default profile with the h200 and llama3.1-8b profiles inline."""
    data = json.loads((PROFILE_DIR / "default.json").read_text())
    hw = json.loads((HARDWARE_DIR / "h200.json").read_text())
    hw.pop("efficiency_from")
    hw["efficiency"] = json.loads((HARDWARE_DIR / "h100.json").read_text())["efficiency"]
    data.update(hardware=hw, model=json.loads((MODEL_DIR / "llama3.1-8b.json").read_text()),
                twin={"run_id": "RUN7"})
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))
    return path


def test_cells_served_on_a_twin_are_labelled_with_its_run(tmp_path):
    path = twin_profile(tmp_path)
    config = {"engine": {"name": "sim", "options": {"profile": str(path)}},
              "model": {"name": "llama3.1-8b"}}
    assert source_label(config) == TWIN_LABEL
    assert source_label({**config, "engine": {"name": "sim", "options": {}}}) == "SIMULATION"


def test_the_plan_says_whose_twin_serves(tmp_path):
    path = twin_profile(tmp_path)
    planned = make_plan(["+sweep=smoke", f"engine.options.profile={path}", "hardware=h200",
                         "model=llama3.1-8b", f"results_dir={tmp_path}"])
    from grid.plan.build import format_plan

    text = format_plan(planned.plan)
    assert text.count(f"numbers: {TWIN_LABEL}") == 2  # one line per server group
    assert "profile twin on h200 / llama3.1-8b" in text  # the cells' engine version


def test_a_twin_on_another_node_is_bad_input(tmp_path, capsys):
    path = twin_profile(tmp_path)  # default hardware: rtx-pro-6000
    assert_bad_input(["+sweep=smoke", f"engine.options.profile={path}", "model=llama3.1-8b"],
                     "is fitted on hardware 'h200', not 'rtx-pro-6000': run it with "
                     "hardware=h200", tmp_path / "results", capsys)


def test_the_report_and_decision_name_the_twin(tmp_path):
    run = tmp_path / "RUN8"
    write_run(run, {"baseline": {1: 90.0, 8: 60.0}, "eagle3": {1: 120.0, 8: 50.0}},
              cell_fields={"source": TWIN_LABEL})
    data = load_run(run, replicates=50)
    assert data.label == TWIN_LABEL
    banner = data.validity[0]
    assert banner[0] == "warning" and banner[1].startswith(f"{TWIN_LABEL} — ")
    assert "fitted to a run's measured cells" in banner[1]
    decision = decision_json(data)
    assert decision["simulated"] is True and decision["source"] == TWIN_LABEL
    assert decision["validity"][0]["text"] == banner[1]
    from grid.report.html import validity_section

    assert f'<p class="banner">{TWIN_LABEL} — ' in validity_section(data)
