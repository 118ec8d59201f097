"""The shipped prompt sets (workloads/prompts/*.jsonl) are well-formed, sized and varied.

Domain files (coding, agentic, math, chat, encyclopedic) hold at least 60 prompts of their own
domain with short and multi-kilobyte prompts; long_context.jsonl is the long-context subset;
mixed.jsonl is a composition of other files and is only checked for well-formedness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads import PROMPTS_DIR

DOMAIN_FILES = ("coding", "agentic", "math", "chat", "encyclopedic")
COMPOSED_FILES = ("mixed",)
LONG_FILE = "long_context"
REQUIRED = ("prompt_id", "domain", "source", "text")

SHIPPED = sorted(PROMPTS_DIR.glob("*.jsonl"))


def read_records(path: Path) -> list[dict]:
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # raises on invalid UTF-8
    assert not text.endswith("\n\n"), f"{path.name}: trailing blank line"
    records = []
    for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        assert line.strip(), f"{path.name}:{n}: blank line"
        item = json.loads(line)
        assert isinstance(item, dict), f"{path.name}:{n}: not a JSON object"
        records.append(item)
    return records


def curated_files() -> list[Path]:
    return [p for p in SHIPPED if p.stem not in COMPOSED_FILES]


def test_the_expected_files_are_shipped() -> None:
    stems = {p.stem for p in SHIPPED}
    for stem in ("coding", "agentic", "math", LONG_FILE):
        assert stem in stems, f"{stem}.jsonl missing from {PROMPTS_DIR}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_file_parses_with_unique_ids_and_required_fields(path: Path) -> None:
    records = read_records(path)
    assert records, f"{path.name} is empty"
    required = ("prompt_id", "domain", "text") if path.stem in COMPOSED_FILES else REQUIRED
    for item in records:
        for field in required:
            value = item.get(field)
            assert isinstance(value, str) and value.strip(), \
                f"{path.name}: {item.get('prompt_id')!r} lacks {field!r}"
    ids = [item["prompt_id"] for item in records]
    assert len(ids) == len(set(ids)), f"{path.name}: duplicate prompt_id"


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.stem in DOMAIN_FILES],
                         ids=lambda p: p.name)
def test_domain_file_is_sized_and_varied(path: Path) -> None:
    records = read_records(path)
    assert len(records) >= 60, f"{path.name}: {len(records)} prompts, want >= 60"
    assert {item["domain"] for item in records} == {path.stem}
    assert all(item["prompt_id"].startswith(f"{path.stem}-") for item in records)
    lengths = [len(item["text"]) for item in records]
    short = sum(n < 300 for n in lengths)
    long = sum(n > 1500 for n in lengths)
    assert short >= 5, f"{path.name}: only {short} prompts under 300 chars"
    assert long >= 5, f"{path.name}: only {long} prompts over 1500 chars"


def test_long_context_subset() -> None:
    records = read_records(PROMPTS_DIR / f"{LONG_FILE}.jsonl")
    assert len(records) >= 12
    for item in records:
        assert item.get("subset") == "long", item["prompt_id"]
        assert item["domain"] in ("coding", "agentic"), item["prompt_id"]
        assert item["prompt_id"].startswith("long-"), item["prompt_id"]
        size = len(item["text"].encode("utf-8"))
        assert 4 * 1024 <= size <= 16 * 1024, f"{item['prompt_id']}: {size} bytes"


def test_ids_unique_and_no_near_duplicates_across_curated_files() -> None:
    seen_ids: dict[str, str] = {}
    seen_heads: dict[str, str] = {}
    for path in curated_files():
        for item in read_records(path):
            pid = item["prompt_id"]
            assert pid not in seen_ids, f"{pid} in both {seen_ids[pid]} and {path.name}"
            seen_ids[pid] = path.name
            head = " ".join(item["text"][:80].split()).lower()
            assert head not in seen_heads, \
                f"{pid} ({path.name}) starts like {seen_heads[head]}: {head!r}"
            seen_heads[head] = pid
