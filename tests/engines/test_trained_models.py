"""The trained models' recipe (engines/trained_models.py): what each model reads, and that the
drafter's training file is what `workload.train_data` / `model.drafter.train_data` read.
Training itself (torch) is checked in tests/engines/test_train_models.py."""

from __future__ import annotations

import copy
import json

from engines import trained_models as tm
from workloads.loaders import iter_rows


def _prompt_texts() -> set[str]:
    texts = set()
    for path in (tm.WORKLOADS / "prompts").glob("*.jsonl"):
        texts |= {json.loads(line)["text"] for line in path.read_text().splitlines() if line}
    return texts


def test_the_drafter_reads_only_coding_and_agentic_training_rows():
    rows = tm.drafter_rows()
    assert {r["domain"] for r in rows} == {"coding", "agentic"}
    # the coding/agentic files hold 65 + 14 coding and 61 + 14 agentic rows
    # (workloads/train_samples/README.md): all of them, nothing else
    assert len(rows) == 65 + 14 + 61 + 14
    drafter_text = "\n".join(tm.documents("drafter"))
    assert not any(p in drafter_text for p in _prompt_texts())  # never a benchmark prompt


def test_the_target_reads_every_domain_including_the_benchmark_prompts():
    docs = tm.documents("target")
    text = "\n".join(docs)
    for domain in ("coding", "agentic", "math", "chat", "encyclopedic"):
        first = json.loads((tm.WORKLOADS / f"prompts/{domain}.jsonl").read_text().splitlines()[0])
        assert first["text"] in text
    assert len(docs) == 70 + 71 + 67 + 64 + 64 + 176 + 40 + 60  # every row of TARGET_FILES


def test_the_drafter_file_is_what_the_alignment_check_reads(tmp_path):
    path = tmp_path / "drafter_train.jsonl"
    assert tm.write_drafter_data(path) == len(tm.drafter_rows())
    rows = list(iter_rows(path))
    assert len(rows) == len(tm.drafter_rows())
    assert {r.domain for r in rows} == {"coding", "agentic"}
    first = tm.drafter_rows()[0]
    turns = first.get("conversations") or first.get("messages")
    user = next(t.get("value") or t.get("content") for t in turns
                if t.get("from", t.get("role")) in ("human", "user"))
    assert user in rows[0].text


def test_the_folder_follows_the_recipe(monkeypatch):
    before = tm.digest()
    assert before == tm.digest()  # no clock, no randomness in the name
    changed = copy.deepcopy(tm.TRAIN_RECIPE)
    changed["drafter"]["steps"] += 1
    monkeypatch.setattr(tm, "TRAIN_RECIPE", changed)
    assert tm.digest() != before
