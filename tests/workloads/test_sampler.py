"""Stratified sampling: mix, reproducibility across processes, holdout splits, bad mixes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.loaders import iter_rows
from workloads.records import TextRow, domain_of
from workloads.sampler import SampleError, allocate, in_holdout, normalize_mix, stratified_sample

ROOT = Path(__file__).resolve().parents[2]


def _rows(counts: dict[str, int]) -> list[TextRow]:
    return [TextRow(f"{source} example number {i}", source, domain_of(source, None), "mem", i)
            for source, n in counts.items() for i in range(n)]


def test_sample_follows_the_training_mix_by_source():
    rows = _rows({"magicoder": 6000, "glaive": 3000, "ultrachat": 1000})
    sample = stratified_sample(rows, 500, seed=3)
    assert sample.by == "source"
    counts = {s: sum(r.source == s for r in sample.rows) for s in ("magicoder", "glaive",
                                                                  "ultrachat")}
    # Stratified: the counts equal the allocation of 500 by the data's own 60/30/10 mix.
    assert counts == {"magicoder": 300, "glaive": 150, "ultrachat": 50}
    assert len({r.key for r in sample.rows}) == 500


def test_sample_follows_a_requested_domain_mix_within_sampling_error():
    rows = _rows({"magicoder": 2000, "opencodeinstruct": 2000, "glaive": 1500, "sweagent": 1500,
                  "ultrachat": 3000})
    sample = stratified_sample(rows, 400, seed=0, mix={"coding": 0.6, "agentic": 0.4})
    assert sample.by == "domain"
    domains = [r.domain for r in sample.rows]
    assert domains.count("coding") == 240 and domains.count("agentic") == 160
    # Within a domain the sources come out in proportion to the data (uniform sampling):
    # magicoder is half of coding; binomial(240, 0.5) stays within 4 standard deviations.
    magicoder = sum(r.source == "magicoder" for r in sample.rows)
    assert abs(magicoder - 120) <= 4 * math.sqrt(240 * 0.25)


def test_seed_changes_the_sample_and_the_same_seed_repeats_it():
    rows = _rows({"a": 300, "b": 300})
    one = [r.key for r in stratified_sample(rows, 50, seed=1).rows]
    again = [r.key for r in stratified_sample(list(reversed(rows)), 50, seed=1).rows]
    other = [r.key for r in stratified_sample(rows, 50, seed=2).rows]
    assert one == again  # file order does not matter, only content and seed
    assert set(one) != set(other)


_CHILD = """
import json, sys
from workloads.loaders import iter_rows
from workloads.sampler import stratified_sample
s = stratified_sample(iter_rows(sys.argv[1]), 40, seed=7, mix={"glaive": 1, "magicoder": 3})
print(json.dumps([r.text for r in s.rows]))
"""


def test_reproducible_across_processes(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{src} prompt {i}", "source": src}) + "\n"
                            for src in ("glaive", "magicoder", "ultrachat") for i in range(200)))
    outputs = []
    for hash_seed in ("1", "2"):  # different str-hash salts: Python's hash() would differ
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert sum(t.startswith("glaive") for t in outputs[0]) == 10
    assert sum(t.startswith("magicoder") for t in outputs[0]) == 30


def test_holdout_fraction_draws_only_held_out_rows():
    rows = _rows({"magicoder": 500, "glaive": 500})
    sample = stratified_sample(rows, 60, seed=0, holdout_fraction=0.2)
    held = {r.key for r in rows if in_holdout(r, 0.2)}
    assert 120 <= len(held) <= 280  # ~200 of 1000 rows
    assert len(sample.rows) == 60
    assert {r.key for r in sample.rows} <= held


def test_holdout_file_never_yields_training_rows(tmp_path):
    train = tmp_path / "train.jsonl"
    holdout = tmp_path / "holdout.jsonl"
    train_texts = [f"train prompt {i}" for i in range(100)]
    shared = train_texts[:30]  # leaked into the holdout file
    held_texts = [f"held prompt {i}" for i in range(50)]
    train.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in train_texts))
    holdout.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in held_texts + shared))
    exclude = frozenset(r.key for r in iter_rows(train))
    sample = stratified_sample(iter_rows(holdout), 80, seed=0, exclude_keys=exclude)
    texts = {r.text for r in sample.rows}
    assert texts == set(held_texts)  # every clean held-out row, none of the leaked ones
    assert sample.excluded_training_rows == 30


@pytest.mark.parametrize("mix", [{"a": 0, "b": 0}, {"a": -1, "b": 2}, {"a": "x"}])
def test_mix_weights_must_sum_to_a_positive_number(mix):
    with pytest.raises(SampleError):
        normalize_mix(mix)


def test_mix_naming_a_missing_stratum_is_an_error():
    with pytest.raises(SampleError, match="sharegpt"):
        stratified_sample(_rows({"magicoder": 10}), 5, mix={"magicoder": 1, "sharegpt": 1})


def test_empty_after_filtering_is_an_error():
    with pytest.raises(SampleError, match="no eligible rows"):
        stratified_sample(_rows({"a": 3}), 5, holdout_fraction=1e-12)


def test_short_stratum_is_reported():
    sample = stratified_sample(_rows({"magicoder": 100, "glaive": 2}), 20,
                               mix={"magicoder": 0.5, "glaive": 0.5})
    assert sample.counts == {"magicoder": 10, "glaive": 2}
    assert sample.notes == ["source glaive: 2 rows available, 10 asked"]


def test_allocate_largest_remainder():
    assert allocate(10, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}) == {"a": 4, "b": 3, "c": 3}
    assert allocate(7, {"x": 0.5, "y": 0.5}) == {"x": 4, "y": 3}
