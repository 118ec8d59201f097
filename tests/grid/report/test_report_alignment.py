"""The report's acceptance-against-alignment section on a constructed run of a real engine on
the CPU with the trained models: text, HTML, figure and decision.json."""

from __future__ import annotations

import json

import pandas as pd

from grid.report import write_report
from tests.grid.analysis.synthetic import grid

SOURCE = "real engine, CPU, tiny trained models"
# workload -> (alignment, tokens per verify step of its speculative requests)
# 100-token requests with spec_verify_ct = round(100 / a): 100/33 -> 99/33 = 3.00 decode-only,
# 100/50 -> 99/50 = 1.98, 100/83 -> 99/83 = 1.19 (each request alike: intervals are points)
WORKLOADS = {"coding": (0.33, 3.0), "agentic": (0.25, 2.0), "encyclopedic": (0.02, 1.2)}


def _write(run_dir, workloads=tuple(WORKLOADS)) -> None:
    from grid.store.results import write_cell
    from grid.store.schema import CELL_FIELDS, REQUEST_FIELDS

    for workload in workloads:
        alignment, accept = WORKLOADS[workload]
        cells, requests = grid({"baseline": {4: 100.0}, "tiny_trained_draft": {4: 120.0}},
                               workload=workload, spec_accept=accept)
        for cell in cells.to_dict("records"):
            cid = f"{cell['cell_id']}-{workload}"
            spec = cell["variant"] != "baseline"
            rows = []
            for r in requests[requests.cell_id == cell["cell_id"]].to_dict("records"):
                row = {k: r.get(k) for k in REQUEST_FIELDS.names}
                row.update(run_id=run_dir.name, cell_id=cid, attempt=1, engine="vllm",
                           simulated=False, input_tokens=100, itl_s=[], rate=None,
                           domain=workload,
                           spec_verify_ct=None if pd.isna(r["spec_verify_ct"])
                           else int(r["spec_verify_ct"]))
                rows.append(row)
            row = {k: cell.get(k) for k in CELL_FIELDS.names}
            row.update(run_id=run_dir.name, cell_id=cid, server_key=cell["variant"],
                       model="tiny_trained", rate=None, engine="vllm", simulated=False,
                       device="cpu", source=SOURCE, temperature=0.0,
                       engine_version="vllm 0.32.0",
                       alignment=alignment if spec else None,
                       alignment_ok=False if spec else None,
                       server_command="python -m vllm.entrypoints.openai.api_server")
            write_cell(run_dir, variant=cell["variant"], workload=workload, cell_id=cid,
                       attempt=1, requests=rows, cell_row=row)


def test_section_figure_and_decision_with_the_real_engine_label(tmp_path):
    run_dir = tmp_path / "cpu_lesson-vllm-tiny_trained-abc"
    _write(run_dir)
    report = write_report(run_dir)
    text = (run_dir / "report.md").read_text()
    assert "REAL ENGINE, CPU, TINY TRAINED MODELS" in text
    assert "accept length (decode-only, 95 % interval over requests) against alignment" in text
    # hand-worked: ranks 0.33 > 0.25 > 0.02 against 3.00 > 1.98 > 1.19 agree -> rho = +1
    assert "Spearman rho +1.00" in text and "over 3 workloads (96 requests)" in text
    assert "most aligned coding (0.33) accepts 3.00 [3.00, 3.00]" in text
    assert "least aligned encyclopedic (0.02) 1.19 [1.19, 1.19]: intervals apart" in text
    # both workloads under the simulator's 0.3 floor, apart and rising with alignment: the
    # report says the simulator's drafter model has them equal
    assert ("note: tiny_trained_draft at temperature 0: the simulator's drafter gives every "
            "prompt at alignment <= 0.3 the same off-distribution acceptance") in text
    assert "range from agentic (0.25) 1.98 [1.98, 1.98] to encyclopedic (0.02) 1.19" in text
    assert any(p.name == "alignment.png" for p in report.plots)
    html = (run_dir / "report.html").read_text()
    assert "Acceptance against alignment with the drafter&#x27;s training data" in html \
        or "Acceptance against alignment with the drafter's training data" in html
    decision = json.loads((run_dir / "decision.json").read_text())
    (rel,) = decision["alignment_vs_acceptance"]
    assert rel["variant"] == "tiny_trained_draft" and rel["spearman"] == 1.0
    assert rel["most_aligned"]["workload"] == "coding" and rel["apart"] is True


def test_one_workload_has_no_relation_to_show(tmp_path):
    # One workload per load: nothing to rank, so no section, figure or decision entry (its
    # accept length is in the main table); before, a one-workload sweep printed an
    # "undefined" correlation line for every load.
    run_dir = tmp_path / "one-workload"
    _write(run_dir, ("coding",))
    write_report(run_dir)
    text = (run_dir / "report.md").read_text()
    assert "against alignment with the drafter's training data" not in text
    assert "rank correlation" not in text
    assert "alignment_vs_acceptance" not in json.loads((run_dir / "decision.json").read_text())
    assert not (run_dir / "plots" / "alignment.png").exists()
