"""The report of a grid with an engine or a model axis, from Parquet written by the real
results writer: every table, line and decision.json row pairs a variant with its own setup's
baseline, and the setups are compared baseline to baseline in a section of their own. The
per-stream speeds are chosen by hand; each expected ratio is two of them divided."""

from __future__ import annotations

import json

import pytest

from grid.report import write_report
from tests.grid.analysis.synthetic import write_run


def _speedups(decision: dict) -> dict[tuple[str, float], dict]:
    return {(r["variant"], r["load"]): r for r in decision["speedups"]}


def test_two_engine_report_compares_each_engine_with_itself(tmp_path):
    run = tmp_path / "engines"
    # SGLang's baseline 100 tok/s per stream, its EAGLE-3 130 (+30 %); vLLM's baseline 160
    # (+60 % over SGLang's), its EAGLE-3 192 at c=1 (+20 %) and 128 at c=4 (-20 %).
    write_run(run, {"baseline": {1: 100.0, 4: 100.0}, "eagle3": {1: 130.0}}, engine="sglang",
              model="llama3.1-8b")
    write_run(run, {"baseline": {1: 160.0, 4: 160.0}, "eagle3": {1: 192.0, 4: 128.0}},
              engine="vllm", model="llama3.1-8b")
    report = write_report(run)
    decision = json.loads(report.decision.read_text())
    rows = _speedups(decision)
    assert rows[("vllm · eagle3", 1)]["baseline"] == "vllm · baseline"
    assert rows[("vllm · eagle3", 1)]["speedup"] == pytest.approx(0.20, abs=0.03)
    assert rows[("vllm · eagle3", 4)]["speedup"] == pytest.approx(-0.20, abs=0.03)
    assert rows[("sglang · eagle3", 1)]["speedup"] == pytest.approx(0.30, abs=0.03)
    (rec,) = [r for r in decision["recommendations"] if r["variant"] == "vllm · eagle3"]
    assert rec["speculative_disable_above_batch"] == 1
    engines = {r["load"]: r for r in decision["setup_comparisons"]}
    assert {r["axis"] for r in engines.values()} == {"engine"}
    assert engines[1]["speedup"] == pytest.approx(0.60, abs=0.04)
    text = report.summary
    assert "vllm · eagle3 vs baseline on coding: c=1 +" in text
    assert "sglang · baseline" in text and "vllm · baseline" in text  # the cells table
    assert "engine vllm vs sglang, baseline to baseline on coding: c=1 +6" in text
    # the per-domain table has its speedup column: vLLM's EAGLE-3 at c=1 over vLLM's own
    (domain_row,) = [line for line in text.splitlines()
                     if line.strip().startswith("vllm · eagle3") and " 1 coding " in line]
    assert domain_row.split()[-2] in ("+18%", "+19%", "+20%", "+21%", "+22%", "+23%")
    page = report.html.read_text()
    assert "Setups compared, baseline to baseline" in page
    assert "<td>vllm · eagle3</td><td>vllm · baseline</td>" in page


def test_two_model_report_keeps_the_models_apart(tmp_path):
    run = tmp_path / "models"
    # 8B: 207 -> 275 tok/s (+33 %); 70B: 153 -> 221 (+44 %); pooled: +38 %
    write_run(run, {"baseline": {1: 207.0}, "eagle3": {1: 275.0}}, engine="sim",
              model="llama3.1-8b")
    write_run(run, {"baseline": {1: 153.0}, "eagle3": {1: 221.0}}, engine="sim",
              model="llama3.3-70b")
    report = write_report(run)
    decision = json.loads(report.decision.read_text())
    rows = _speedups(decision)
    assert set(rows) == {("llama3.1-8b · eagle3", 1), ("llama3.3-70b · eagle3", 1)}
    assert rows[("llama3.1-8b · eagle3", 1)]["speedup"] == pytest.approx(275 / 207 - 1, abs=0.03)
    assert rows[("llama3.3-70b · eagle3", 1)]["speedup"] == pytest.approx(221 / 153 - 1,
                                                                           abs=0.03)
    (models,) = decision["setup_comparisons"]
    assert (models["value"], models["reference"]) == ("llama3.3-70b", "llama3.1-8b")
    assert models["speedup"] == pytest.approx(153 / 207 - 1, abs=0.03)
    cells_table = [line for line in report.summary.splitlines() if " c=1 " in line
                   and line.split()[-1] == "done"]
    assert sorted(line.split(" coding")[0].strip() for line in cells_table) == [
        "llama3.1-8b · baseline", "llama3.1-8b · eagle3", "llama3.3-70b · baseline",
        "llama3.3-70b · eagle3"]
