from __future__ import annotations

import base64
import json
import re

import pandas as pd
import pytest

from grid.analysis import Slo
from grid.report import main, write_report
from grid.report.text import domain_acceptance, summary_table
from tests.grid.analysis.synthetic import write_run


def _base(c: int) -> float:
    return 100.0 / (1 + c / 8)


SPEEDS = {"baseline": {c: _base(c) for c in (1, 4, 16)},
          "eagle3": {1: 1.4 * _base(1), 4: 1.1 * _base(4), 16: 0.7 * _base(16)}}


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "synthetic-run"
    write_run(path, SPEEDS)
    return path


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"',
                                                    page)]


def test_html_report_decision_and_plots_from_parquet(run_dir):
    report = write_report(run_dir, Slo(tpot_ms=15.0))
    page = report.html.read_text()
    # the answer first, then the decision, then what limits it
    assert page.index('class="answer"') < page.index("<h2>Decision") < page.index(
        "<h2>Validity") < page.index("<h2>Plots")
    assert "SIMULATION" in page[:page.index("<h2>Decision")]  # in the answer itself
    images = _images(page)
    assert len(images) >= 4 and all(i.startswith(b"\x89PNG") and len(i) > 5000
                                    for i in images)
    assert {p.name for p in report.plots} >= {"throughput.png", "latency.png", "speedup.png",
                                               "acceptance.png"}
    decision = json.loads(report.decision.read_text())
    assert decision["simulated"] is True and decision["slo"]["tpot_ms"] == 15.0
    (rec,) = decision["recommendations"]
    assert rec["speculative_disable_above_batch"] == 4
    verdicts = {s["load"]: s["verdict"] for s in decision["speedups"]}
    assert verdicts == {1.0: "faster", 4.0: "faster", 16.0: "slower"}
    # TPOT SLO 15 ms: baseline at c=16 runs 100/3 tok/s per stream = 30 ms/token -> no goodput
    base16 = [s for s in decision["goodput_speedups"] if s["load"] == 16.0]
    assert base16 and base16[0]["speedup"] is None  # 0 / 0: undefined, not a number
    assert "eagle3 vs baseline on coding" in (run_dir / "report.md").read_text()


def test_saved_slo_is_reused_by_a_plain_rerender(run_dir, capsys):
    write_report(run_dir, Slo(ttft_ms=100.0))
    assert main([str(run_dir)]) == 0
    assert json.loads((run_dir / "decision.json").read_text())["slo"]["ttft_ms"] == 100.0
    assert "TTFT <= 100 ms" in capsys.readouterr().out


def test_comparing_two_runs_side_by_side(tmp_path, run_dir, capsys):
    other = tmp_path / "other-run"
    write_run(other, {"baseline": {c: 1.25 * v for c, v in SPEEDS["baseline"].items()},
                      "eagle3": SPEEDS["eagle3"]})
    out = tmp_path / "cmp.html"
    assert main([str(run_dir), str(other), "--out", str(out)]) == 0
    page = out.read_text()
    assert "B faster" in page and "undetermined" in page  # eagle3 unchanged
    assert len(_images(page)) >= 3


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specgrid: error:") and len(err.strip().splitlines()) == 1


def test_summary_marks_saturated_clients():
    table = pd.DataFrame([dict(variant="eagle3", workload="coding", concurrency=64, rate=None,
                               repeat=0, status="done", client_saturated=True,
                               output_tok_s=354.0, output_tok_s_lo=340.0, output_tok_s_hi=360.0,
                               window_s=10.0, window_requests=128)])
    line = summary_table(table).splitlines()[-1]
    assert "354 [340, 360]" in line and line.endswith("done (client saturated)")


def test_domain_acceptance_is_ratio_of_sums():
    requests = pd.DataFrame({
        "variant": ["eagle3"] * 3, "domain": ["coding", "coding", "encyclopedic"],
        "status": ["ok"] * 3, "output_tokens": [100, 300, 100], "spec_verify_ct": [50, 50, 80]})
    assert domain_acceptance(requests) == [
        "eagle3 / coding: accept length 4.00 (2 requests)",
        "eagle3 / encyclopedic: accept length 1.25 (1 requests)"]


def test_gpu_telemetry_plot_and_energy_per_token(tmp_path):
    from grid.report.data import load_run
    from grid.report.plots import telemetry

    run_dir = tmp_path / "telemetry-run"
    # cell baseline-c1: two GPUs at a constant 300 W for 10 s -> 6000 J
    rows = [{"run_id": run_dir.name, "cell_id": "baseline-c1", "attempt": 1, "node": "n1",
             "gpu": gpu, "sampled_at": 1000.0 + t, "metric": metric, "value": value,
             "note": None}
            for gpu in (0, 1) for t in range(11)
            for metric, value in (("power_w", 300.0), ("gpu_util_pct", 90.0),
                                  ("memory_used_mib", 70000.0))]
    write_run(run_dir, SPEEDS, telemetry={"baseline-c1": rows})
    data = load_run(run_dir)
    energy = data.energy.set_index("cell_id")
    tokens = data.stats.table.set_index("cell_id").measured_tokens["baseline-c1"]
    assert tokens == 8 * 100  # 1 stream x 8 requests x 100 tokens
    assert energy.energy_j["baseline-c1"] == pytest.approx(6000.0)
    assert energy.j_per_token["baseline-c1"] == pytest.approx(6000.0 / 800)
    assert telemetry(data) is not None
    page = write_report(run_dir, data=data).html.read_text()
    assert "7.50" in page  # J/token in the cells table


def test_off_distribution_prompts_are_flagged_when_recorded(run_dir):
    from grid.report.data import load_run
    from grid.report.validity import validity

    data = load_run(run_dir)
    assert any("alignment" in text and "not recorded" in text for _, text in data.validity)
    data.requests["alignment_ok"] = data.requests.cell_id != "eagle3-c4"
    warnings = [text for level, text in validity(data) if level == "warning"]
    assert any(text.startswith("off-distribution prompts") and "1 cell(s), up to 100 %" in text
               for text in warnings)


def test_a_run_of_failed_cells_still_reports(tmp_path):
    from grid.store.results import write_cell

    run = tmp_path / "failed-run"
    row = {"run_id": run.name, "cell_id": "x1", "attempt": 1, "status": "failed",
           "error": "server did not start", "engine": "sim", "simulated": True,
           "concurrency": 4, "server_key": "k", "factors": "{}"}
    write_cell(run, variant="eagle3", workload="coding", cell_id="x1", attempt=1, requests=[],
               cell_row=row)
    report = write_report(run)
    assert "1 cell(s) not done" in report.summary and report.summary.rstrip().count("failed")
    assert json.loads(report.decision.read_text())["speedups"] == []
    assert "SIMULATION" in report.html.read_text()


def test_open_loop_cells_are_compared_by_rate(tmp_path):
    from grid.analysis import analyse_cells, decide
    from tests.grid.analysis.synthetic import grid

    cells, requests = grid({"baseline": {4: 20.0}, "eagle3": {4: 30.0}})
    cells["rate"], requests["rate"] = 2.0, 2.0  # the same timelines, labelled open loop
    decision = decide(analyse_cells(cells, requests, replicates=200))
    (row,) = decision.speedups.itertuples()
    assert row.load_kind == "rate" and row.load == 2.0 and row.verdict == "faster"
    assert decision.recommendations == []  # a threshold is a batch size: closed loop only
