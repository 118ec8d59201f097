"""Workloads on the grid side without Ray: bad input exits 2 with one line before anything
starts, the plan prints alignment figures and warns about off-distribution cells, shaping and
train-matched sampling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grid.plan.workloads import load_workload
from grid.run import run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def train_file(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = []
    for i in range(40):
        rows.append({"source": "magicoder", "conversations": [
            {"from": "human", "value": f"Write a Python function parse_{i}(text) that returns "
                                       "a dict, with pytest unit tests and type hints."},
            {"from": "gpt", "value": "def parse..."}]})
        rows.append({"source": "glaive", "messages": [
            {"role": "system", "content": "Available tools: search(query), read_file(path)"},
            {"role": "user", "content": f"Use the tools to find bug {i} in the repository and "
                                        "call run_tests with the JSON arguments."}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def _bad(tmp_path, capsys, *overrides: str) -> str:
    outcome = run(["+sweep=smoke", f"results_dir={tmp_path / 'results'}", *overrides],
                  echo=lambda line: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == 2
    assert len(err) == 1 and err[0].startswith("specgrid: error: "), err
    assert not (tmp_path / "results").exists()  # no results folder, nothing started
    return err[0]


def test_missing_training_file_exits_2(tmp_path, capsys):
    line = _bad(tmp_path, capsys, "grid.axes.workload=[train_matched]",
                f"workload.train_data={tmp_path}/nope.jsonl")
    assert "nope.jsonl not found" in line


def test_unknown_format_exits_2(tmp_path, capsys):
    path = tmp_path / "train.csv"
    path.write_text("prompt,answer\n")
    line = _bad(tmp_path, capsys, "grid.axes.workload=[train_matched]",
                f"workload.train_data={path}")
    assert str(path) in line and "unknown training-data format" in line


def test_empty_after_filtering_exits_2(tmp_path, capsys, train_file):
    line = _bad(tmp_path, capsys, "workload.input_tokens=[5000,6000]")
    assert "no prompts after filtering" in line
    line = _bad(tmp_path, capsys, "grid.axes.workload=[train_matched]",
                f"workload.train_data={train_file}", "workload.input_tokens=[5000,6000]")
    assert "no eligible rows" in line


@pytest.mark.parametrize("override", ["workload.mix={coding:0,agentic:0}", "workload.mix=[1,2]",
                                      "workload.mix={coding:-1,agentic:1}"])
def test_mix_not_summing_to_a_positive_number_exits_2(tmp_path, capsys, train_file, override):
    line = _bad(tmp_path, capsys, "grid.axes.workload=[train_matched]",
                f"workload.train_data={train_file}", override)
    assert "workload.mix" in line
    assert any(w in line for w in ("positive", "negative", "must be a mapping"))


def test_drafter_mix_not_summing_to_a_positive_number_exits_2(tmp_path, capsys):
    line = _bad(tmp_path, capsys, "model.drafter.train_mix={coding:0,agentic:0,math:0,chat:0}")
    assert "model.drafter.train_mix" in line and "positive" in line


def test_mix_without_training_data_exits_2(tmp_path, capsys):
    line = _bad(tmp_path, capsys, "workload.mix={coding:1}")
    assert "needs workload.train_data" in line


def test_bad_input_from_the_command_line_before_ray(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "grid.run", "+sweep=smoke", "grid.axes.workload=[train_matched]",
         f"workload.train_data={tmp_path}/missing.parquet", f"results_dir={tmp_path}/r"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"specgrid: error: training data {tmp_path}/missing.parquet not found"]
    assert "ray" not in done.stdout.lower() and not (tmp_path / "r").exists()


def test_plan_prints_alignment_and_warns_off_distribution(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "plan=true", f"results_dir={tmp_path}",
                   "grid.axes.workload=[coding,encyclopedic]"], echo=lines.append)
    assert outcome.exit_code == 0
    text = "\n".join(lines)
    coding = next(line for line in text.splitlines() if line.startswith("alignment coding x"))
    ency = next(line for line in text.splitlines() if line.startswith("alignment encyclopedic"))
    assert "eagle3" in coding and "on the drafter's distribution" in coding
    assert "OFF the drafter's distribution" in ency
    assert float(coding.split(": ")[1].split()[0]) > float(ency.split(": ")[1].split()[0])
    assert "warning: encyclopedic x eagle3: speculative decoding measured OFF" in text
    assert "warning: coding x eagle3" not in text
    assert "alignment coding x baseline" not in text  # no drafter, no figure
    # The simulated drafter follows the model's drafter mix.
    assert "--sim-drafter-train-mix" in text


def test_train_matched_plan_samples_and_reports_malformed_rows(tmp_path, train_file):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "plan=true", f"results_dir={tmp_path}",
                   "grid.axes.workload=[train_matched]", f"workload.train_data={train_file}",
                   "workload.num_prompts=10"], echo=lines.append)
    assert outcome.exit_code == 0, lines
    text = "\n".join(lines)
    assert f"{train_file}:81: not JSON" in text  # the malformed last line, by file:line
    assert "alignment train_matched x eagle3:" in text and f"against train_data {train_file}" \
        in text
    assert f"--sim-drafter-train-data {train_file}" in text


def _workload(**extra):
    base = {"name": "w", "prompts": "coding.jsonl", "domains": [], "input_tokens": None,
            "input_shaping": "filter", "train_data": None, "holdout": None, "mix": {},
            "num_prompts": 256, "sample_seed": 0}
    return {**base, **extra}


def test_input_token_shaping_filter_and_fit():
    full = load_workload(_workload())
    lengths = sorted(-(-len(p.text) // 4) for p in full.prompts)
    lo, hi = lengths[len(lengths) // 4], lengths[3 * len(lengths) // 4]
    kept = load_workload(_workload(input_tokens=[lo, hi]))
    assert 0 < len(kept.prompts) < len(full.prompts)
    assert all(lo <= -(-len(p.text) // 4) <= hi for p in kept.prompts)
    fit = load_workload(_workload(input_tokens=[hi, hi], input_shaping="fit"))
    assert len(fit.prompts) == len(full.prompts)
    assert all(hi * 4 - 3 <= len(p.text) <= hi * 4 for p in fit.prompts)
    assert fit.digest != full.digest


def test_train_matched_sample_is_stratified_and_labelled(train_file):
    ws = load_workload(_workload(name="tm", train_data=str(train_file), num_prompts=20,
                                 mix={"magicoder": 0.25, "glaive": 0.75}))
    sources = [r.source for r in ws.rows]
    assert sources.count("magicoder") == 5 and sources.count("glaive") == 15
    assert {p.domain for p in ws.prompts} == {"coding", "agentic"}
    assert all(r.file == str(train_file) and r.line >= 1 for r in ws.rows)
    assert any("1 malformed row(s)" in note for note in ws.notes)
    again = load_workload(_workload(name="tm", train_data=str(train_file), num_prompts=20,
                                    mix={"magicoder": 0.25, "glaive": 0.75}))
    assert again.digest == ws.digest
