"""The report of a real smoke run (Hydra -> Ray -> simulator processes -> Parquet): the HTML
renders with embedded plots, its validity section says SIMULATION, decision.json is written,
telemetry is recorded as unavailable (no NVML here), and the same run compares with itself
as "undetermined"."""

from __future__ import annotations

import base64
import json
import re

import pytest

from grid.loader import load_telemetry, sql
from grid.report import main
from grid.report.data import load_run
from grid.run import run

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", f"results_dir={tmp_path_factory.mktemp('results')}"],
                  echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    return outcome.run_dir, lines


def test_html_report_of_a_smoke_run(smoke_run):
    run_dir, lines = smoke_run
    page = (run_dir / "report.html").read_text()
    validity = page[page.index("<h2>Validity</h2>"):page.index("<h2>Plots</h2>")]
    assert "SIMULATION" in validity and "too few requests" in validity
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) >= 4
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert all(len(base64.b64decode(i)) > 5000 for i in images)
    assert (run_dir / "plots" / "throughput.png").stat().st_size > 5000
    # the simulator's SGLang-named gauges drawn, and its verify counters in the cells table
    assert (run_dir / "plots" / "server_metrics.png").stat().st_size > 5000
    data = load_run(run_dir, replicates=50)
    eagle3 = set(data.cells.cell_id[data.cells.variant == "eagle3"])
    spec = data.server_deltas[data.server_deltas.cell_id.isin(eagle3)]
    assert len(spec) == 2 and (spec.server_accept_length > 1).all(), spec
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["simulated"] is True and decision["cells"] == {"total": 4, "done": 4}
    assert {s["load"] for s in decision["speedups"]} == {1.0, 4.0}
    assert any(line.startswith("report: ") for line in lines)
    # plain progress lines (no terminal in tests), one per event
    assert any(line.startswith("[1/4] ") and " started (6 requests)" in line for line in lines)
    assert any(line.startswith("[4/4] ") and "ETA" in line for line in lines)


def test_telemetry_without_nvml_is_one_row_per_cell(smoke_run):
    run_dir, _ = smoke_run
    tel = load_telemetry(run_dir)
    assert len(tel) == 4 and (tel.metric == "unavailable").all()
    assert tel.note.str.contains("NVML").all()
    assert sql(run_dir).sql("SELECT count(DISTINCT cell_id) FROM telemetry").fetchall() == [(4,)]


def test_a_run_compared_with_itself_shows_no_difference(smoke_run, tmp_path, capsys):
    run_dir, _ = smoke_run
    out = tmp_path / "cmp.html"
    assert main([str(run_dir), str(run_dir), "--out", str(out)]) == 0
    page = out.read_text()
    assert "B faster" not in page and "B slower" not in page
    assert page.count("<td>undetermined</td>") >= 4
