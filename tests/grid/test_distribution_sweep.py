"""End to end on the simulator (real Ray, real simulator processes, real Parquet): acceptance per
prompt domain follows the drafter's training distribution, off-distribution cells are flagged,
and a train-matched workload records its sampled rows and their sources."""

from __future__ import annotations

import json

import pytest

from grid.analysis.domains import REQUEST_COLUMNS, distribution_summary, domain_table
from grid.loader import load_cells, load_requests
from grid.run import run

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]

FAST = ["workload.max_new_tokens=32", "load.warmup_requests=1", "engine.options.time_scale=0.3",
        "run.metrics_interval_s=null"]


def test_mixed_workload_accepts_more_on_the_drafters_domains(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=distribution", f"results_dir={tmp_path}", "grid.axes.workload=[mixed]",
                   "grid.axes.concurrency=[4]", "load.num_requests=40", *FAST],
                  echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    requests = load_requests(outcome.run_dir)
    spec = requests[(requests.variant == "eagle3") & (requests.status == "ok")]
    by_domain = spec.groupby("domain", observed=True).apply(
        lambda g: g.output_tokens.sum() / g.spec_verify_ct.sum(), include_groups=False)
    assert {"coding", "agentic", "encyclopedic"} <= set(by_domain.index)
    assert by_domain["coding"] > by_domain["encyclopedic"] + 0.3
    assert by_domain["agentic"] > by_domain["encyclopedic"] + 0.3
    # Per request: the similarity to the drafter's data, higher for the drafter's domains.
    sims = spec.groupby("domain", observed=True).nearest_train_similarity.mean()
    assert sims["coding"] > sims["encyclopedic"] and sims["agentic"] > sims["encyclopedic"]
    base = requests[requests.variant == "baseline"]
    assert base.nearest_train_similarity.isna().all()

    cells = load_cells(outcome.run_dir)
    eagle = cells[cells.variant == "eagle3"].iloc[0]
    assert eagle.alignment is not None and "train_mix" in eagle.alignment_reference
    table = domain_table(load_requests(outcome.run_dir, columns=REQUEST_COLUMNS), cells)
    accept = table.set_index("domain").accept_length
    assert accept["coding"] > accept["encyclopedic"] and table.speedup.notna().all()
    summary = distribution_summary(load_requests(outcome.run_dir, columns=REQUEST_COLUMNS),
                                   cells)
    assert "encyclopedic" in summary and "accept length and speedup" in summary


def test_train_matched_records_sampled_rows_sources_and_alignment(tmp_path):
    train = tmp_path / "train.jsonl"
    rows = []
    for i in range(30):
        rows.append({"source": "magicoder", "conversations": [
            {"from": "human", "value": f"Implement a Python class Cache{i} with get and put "
                                       "methods, an LRU eviction policy and pytest tests."},
            {"from": "gpt", "value": "class Cache..."}]})
        rows.append({"source": "sweagent", "conversations": [
            {"from": "system", "value": "Tools: run_tests(), read_file(path), edit(path)"},
            {"from": "human", "value": f"Issue {i}: the parser crashes on empty input. Use "
                                       "the tools to reproduce, fix it and run the tests."}]})
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines: list[str] = []
    outcome = run(["+sweep=distribution", f"results_dir={tmp_path / 'results'}",
                   "grid.axes.workload=[train_matched]", "grid.axes.variant=[eagle3]",
                   "grid.axes.concurrency=[4]", f"workload.train_data={train}",
                   "workload.holdout=0.5", "workload.num_prompts=12", "load.num_requests=12",
                   *FAST], echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    recorded = list((outcome.run_dir / "workloads").glob("train_matched-*.jsonl"))
    assert len(recorded) == 1
    sampled = [json.loads(line) for line in recorded[0].read_text().splitlines()]
    assert len(sampled) == 12
    assert all(s["file"] == str(train) and s["line"] >= 1 for s in sampled)
    assert {s["source"] for s in sampled} == {"magicoder", "sweagent"}

    requests = load_requests(outcome.run_dir)
    assert set(requests.source.dropna()) == {"magicoder", "sweagent"}
    assert requests.nearest_train_similarity.notna().all()
    ids = {s["prompt_id"] for s in sampled}
    assert set(requests.prompt_id) <= ids
    cells = load_cells(outcome.run_dir)
    assert bool(cells.alignment_ok.iloc[0]) and str(train) in cells.alignment_reference.iloc[0]
    assert f"--sim-drafter-train-data {train}" in cells.server_command.iloc[0]
