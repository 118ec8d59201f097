"""The shipped chat/encyclopedic prompt sets and the drafter-training samples are well formed:
every row parses with the fields the loaders need, the sets are as large and as varied in
length as documented (workloads/train_samples/README.md), and no benchmark prompt is reused
as a training user turn (a drafter must be measured on prompts it was not trained on)."""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
PROMPTS = WORKLOADS / "prompts"
TRAIN = WORKLOADS / "train_samples"

SHORT_MAX, MEDIUM_MAX, LONG_MAX = 300, 1500, 4096
"""Length classes in characters: short < 300 <= medium < 1500 <= long <= 4096."""

PROMPT_SETS = {
    "chat": {"sources": {"ultrachat-style", "sharegpt-style", "assistant-style"}, "min_rows": 62},
    "encyclopedic": {"sources": {"wiki-qa-style", "explainer-style"}, "min_rows": 62},
}
CODING_AGENTIC_SOURCES = {"deepseek-kimi", "glaive", "opencodeinstruct", "magicoder",
                          "mixturethoughts", "openthoughts", "ultrachat", "sharegpt", "sweagent"}
TRAIN_SETS = {
    "coding_agentic_sharegpt.jsonl": {"sources": CODING_AGENTIC_SOURCES, "min_rows": 160,
                                      "domains": {"coding", "agentic", "math", "chat"}},
    "coding_agentic_messages.jsonl": {"sources": CODING_AGENTIC_SOURCES, "min_rows": 40,
                                      "domains": {"coding", "agentic", "math", "chat"}},
    "encyclopedic_sharegpt.jsonl": {"sources": {"wiki-qa", "explainer"}, "min_rows": 60,
                                    "domains": {"encyclopedic"}},
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path.name}:{n}: blank line"
        row = json.loads(line)
        assert isinstance(row, dict), f"{path.name}:{n}: not a JSON object"
        rows.append(row)
    return rows


def turns(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) pairs of a ShareGPT or OpenAI-messages row, roles spelled the OpenAI way."""
    if "conversations" in row:
        names = {"system": "system", "human": "user", "gpt": "assistant"}
        return [(names[t["from"]], t["value"]) for t in row["conversations"]]
    return [(t["role"], t["content"]) for t in row["messages"]]


def user_turns(row: dict[str, Any]) -> list[str]:
    return [text for role, text in turns(row) if role == "user"]


def normalise(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = normalise(text).split()
    return {tuple(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}


@pytest.mark.parametrize("stem", sorted(PROMPT_SETS))
def test_prompt_set_rows_are_complete_and_labelled(stem: str) -> None:
    spec = PROMPT_SETS[stem]
    rows = read_jsonl(PROMPTS / f"{stem}.jsonl")
    assert len(rows) >= spec["min_rows"]
    for row in rows:
        assert set(row) == {"prompt_id", "domain", "source", "text"}, row.get("prompt_id")
        assert row["domain"] == stem
        assert row["source"] in spec["sources"], row["prompt_id"]
        assert row["prompt_id"].startswith(f"{stem}-")
        assert row["text"] == row["text"].strip() and row["text"], row["prompt_id"]
    assert len({r["prompt_id"] for r in rows}) == len(rows), "duplicate prompt_id"
    assert set(Counter(r["source"] for r in rows)) == spec["sources"], "a source label is unused"


@pytest.mark.parametrize("stem", sorted(PROMPT_SETS))
def test_prompt_set_lengths_vary_about_40_40_20(stem: str) -> None:
    lengths = [len(r["text"]) for r in read_jsonl(PROMPTS / f"{stem}.jsonl")]
    short = sum(n < SHORT_MAX for n in lengths) / len(lengths)
    medium = sum(SHORT_MAX <= n < MEDIUM_MAX for n in lengths) / len(lengths)
    long_ = sum(n >= MEDIUM_MAX for n in lengths) / len(lengths)
    assert 0.30 <= short <= 0.50, short
    assert 0.30 <= medium <= 0.50, medium
    assert 0.15 <= long_ <= 0.30, long_
    assert max(lengths) <= LONG_MAX


@pytest.mark.parametrize("stem", sorted(PROMPT_SETS))
def test_prompt_set_has_no_near_duplicates(stem: str) -> None:
    """No two prompts share most of their word trigrams (a template with swapped nouns would)."""
    rows = read_jsonl(PROMPTS / f"{stem}.jsonl")
    sets = [(r["prompt_id"], shingles(r["text"])) for r in rows]
    for (id_a, a), (id_b, b) in combinations(sets, 2):
        jaccard = len(a & b) / len(a | b)
        assert jaccard < 0.3, (id_a, id_b, round(jaccard, 2))


@pytest.mark.parametrize("name", sorted(TRAIN_SETS))
def test_train_sample_rows_are_complete(name: str) -> None:
    spec = TRAIN_SETS[name]
    rows = read_jsonl(TRAIN / name)
    assert len(rows) >= spec["min_rows"]
    assert len({r["id"] for r in rows}) == len(rows), "duplicate id"
    for row in rows:
        assert row["source"] in spec["sources"], row["id"]
        assert row["domain"] in spec["domains"], row["id"]
        pairs = turns(row)
        assert all(role in {"system", "user", "assistant"} and text.strip() for role, text in pairs)
        assert user_turns(row), f"{row['id']}: no user turn"
        assert pairs[-1][0] == "assistant", f"{row['id']}: does not end with a reply"
        if "conversations" in row:
            assert "messages" not in row
    assert set(Counter(r["source"] for r in rows)) == spec["sources"], "a source is unused"


def test_coding_agentic_mix_follows_the_reference_drafter() -> None:
    """Mostly coding and agentic, then math/reasoning, a little chat (README's ~35/35/20/10)."""
    rows = read_jsonl(TRAIN / "coding_agentic_sharegpt.jsonl")
    share = {d: n / len(rows) for d, n in Counter(r["domain"] for r in rows).items()}
    assert 0.30 <= share["coding"] <= 0.40 and 0.30 <= share["agentic"] <= 0.40, share
    assert 0.15 <= share["math"] <= 0.25 and 0.05 <= share["chat"] <= 0.15, share
    sweagent = [r for r in rows if r["source"] == "sweagent"]
    assert sweagent and all(r["domain"] == "agentic" for r in sweagent)


def test_coding_agentic_samples_vary_in_turns_and_length() -> None:
    rows = read_jsonl(TRAIN / "coding_agentic_sharegpt.jsonl")
    n_user = [len(user_turns(r)) for r in rows]
    assert sum(n > 1 for n in n_user) >= 16 and max(n_user) >= 3
    first = sorted(len(user_turns(r)[0]) for r in rows)
    assert first[0] < 100 and first[-1] > 1500
    assert sum(n >= 500 for n in first) >= 8


def benchmark_texts() -> dict[str, str]:
    """Every benchmark prompt shipped in workloads/prompts/, normalised, by prompt id."""
    texts = {}
    for path in sorted(PROMPTS.glob("*.jsonl")):
        for row in read_jsonl(path):
            texts[f"{path.stem}:{row['prompt_id']}"] = normalise(row["text"])
    return texts


@pytest.mark.parametrize("name", sorted(TRAIN_SETS))
def test_no_benchmark_prompt_is_a_training_user_turn(name: str) -> None:
    bench = benchmark_texts()
    assert len(bench) >= 124
    for row in read_jsonl(TRAIN / name):
        for text in user_turns(row):
            turn = normalise(text)
            if len(turn) < 40:  # short tool outputs such as "nan" or "11"
                continue
            for pid, prompt in bench.items():
                assert turn != prompt, (row["id"], pid)
                assert not (len(prompt) >= 40 and prompt in turn), (row["id"], pid)
                assert turn not in prompt, (row["id"], pid)
