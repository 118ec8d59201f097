"""A cell's id covers everything that changes what it measures: the engine's detected version,
the simulator profile's content, model and draft paths and revisions, the prompts' content.
Changing any yields new cells; the old ones stay loadable, and status and report show the
versions side by side."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from engines.sim.profile import PROFILE_DIR
from grid.loader import load_cells
from grid.plan.cells import make_cell
from grid.report.data import load_run
from grid.report.text import summary_text
from grid.run import make_plan, run
from grid.status import format_status
from tests.grid.plan.test_cells import _config

SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON")


def _id(config=None, digest="d", version="v1"):
    cell = make_cell({"concurrency": 1}, config or _config(), digest, version)
    return cell.cell_id, cell.server_key


@pytest.mark.parametrize("change", [
    lambda c: c["model"].update(model_path="other/model"),
    lambda c: c["model"].update(draft_model_path="other/draft"),
    lambda c: c["model"].update(revision="abc123"),
    lambda c: c["model"].update(draft_revision="def456"),
])
def test_model_paths_and_revisions_change_cell_and_server(change):
    config = _config()
    config["model"].update(revision=None, draft_revision=None)
    before = _id(config)
    change(config)
    after = _id(config)
    assert after[0] != before[0] and after[1] != before[1]


def test_engine_version_and_prompt_content_change_the_id():
    base = _id()
    assert _id(version="v2")[0] != base[0] and _id(version="v2")[1] != base[1]
    assert _id(digest="other-prompts")[0] != base[0]
    assert _id(digest="other-prompts")[1] == base[1]  # same server


def test_operational_settings_do_not_change_the_id():
    config = _config()
    base = _id(config)
    config["engine"].update(python="/elsewhere/python", ready_timeout_s=5.0)
    config["load"].update(request_timeout_s=1.0)
    assert _id(config) == base


def test_sglang_version_is_part_of_the_plan_ids(tmp_path):
    def ids(version):
        plan = make_plan(["+sweep=smoke", "engine=sglang", "model=llama3.1-8b", "plan=true",
                          f"engine.version={version}", f"results_dir={tmp_path}"]).plan
        assert {c.engine_version for c in plan.cells} == {f"sglang {version}"}
        return {c.cell_id for c in plan.cells}

    assert ids("0.5.23").isdisjoint(ids("0.5.22"))


@pytest.mark.skipif(not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set")
def test_sglang_version_is_read_from_engine_python(tmp_path):
    from engines.sglang.validate import sglang_available

    found = sglang_available(SGLANG_PYTHON)
    plan = make_plan(["+sweep=smoke", "engine=sglang", "model=llama3.1-8b", "plan=true",
                      f"engine.python={SGLANG_PYTHON}", f"results_dir={tmp_path}"]).plan
    assert found and {c.engine_version for c in plan.cells} == {f"sglang {found}"}


def test_sim_profile_is_identified_by_content(tmp_path):
    profile = tmp_path / "p.json"
    shutil.copy(PROFILE_DIR / "default.json", profile)

    def plan():
        return make_plan(["+sweep=smoke", f"engine.options.profile={profile}",
                          f"results_dir={tmp_path}"]).plan

    first = plan()
    same = plan()
    data = json.loads(profile.read_text())
    data["algorithms"]["EAGLE3"]["accept_scale"] *= 0.9
    profile.write_text(json.dumps(data))
    changed = plan()
    assert [c.cell_id for c in first.cells] == [c.cell_id for c in same.cells]
    assert {c.cell_id for c in changed.cells}.isdisjoint({c.cell_id for c in first.cells})
    assert first.run_dir == changed.run_dir  # same folder: old and new side by side


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_new_engine_version_runs_new_cells_and_keeps_the_old(tmp_path):
    profile = tmp_path / "p.json"
    shutil.copy(PROFILE_DIR / "default.json", profile)
    command = ["+sweep=smoke", "grid.axes.variant=[baseline]", "run.id=r",
               f"engine.options.profile={profile}", f"results_dir={tmp_path}"]
    first = run(command, echo=lambda _: None)
    assert first.exit_code == 0 and first.counts["done"] == 2
    data = json.loads(profile.read_text())
    data["algorithms"]["EAGLE3"]["accept_scale"] *= 0.9
    profile.write_text(json.dumps(data))

    lines: list[str] = []
    second = run(command, echo=lines.append)
    assert second.exit_code == 0
    assert "2 cells: 0 done, 2 pending; running 2" in lines  # nothing skipped as done
    assert set(second.cell_ids).isdisjoint(first.cell_ids)
    cells = load_cells(first.run_dir)
    assert set(cells.cell_id) == set(first.cell_ids) | set(second.cell_ids)
    assert cells.engine_version.nunique() == 2 and (cells.status == "done").all()
    versions = sorted(cells.engine_version.unique())
    report = summary_text(load_run(first.run_dir))
    status = format_status(first.run_dir)
    for version in versions:
        assert report.count(f"[{version}]") >= 2
        assert status.count(f"[{version}]") == 2
