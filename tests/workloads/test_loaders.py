"""Training-data readers on constructed files: every format, good and malformed rows, directories,
unknown formats."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workloads.loaders import (
    KEEP_PROBLEMS,
    LoadStats,
    TrainingDataError,
    UnknownFormatError,
    iter_rows,
    render_turns,
)


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _read(path: Path) -> tuple[list, LoadStats]:
    stats = LoadStats()
    return list(iter_rows(path, stats)), stats


def test_plain_jsonl_prompt_and_text_fields(tmp_path):
    path = _write_jsonl(tmp_path / "plain.jsonl", [
        {"prompt": "Sort a list in Python", "source": "magicoder"},
        {"text": "Who built the pyramids?", "domain": "encyclopedic"},
        {"prompt_id": "p-7", "domain": "coding", "source": "bugfix-style", "text": "Fix this"},
    ])
    rows, stats = _read(path)
    assert [r.text for r in rows] == ["Sort a list in Python", "Who built the pyramids?",
                                      "Fix this"]
    assert rows[0].source == "magicoder" and rows[0].domain == "coding"  # from the source family
    assert rows[1].source is None and rows[1].domain == "encyclopedic"
    assert rows[2].prompt_id == "p-7" and rows[2].domain == "coding"
    assert [r.line for r in rows] == [1, 2, 3] and rows[0].file == str(path)
    assert stats.rows == 3 and stats.malformed == 0


def test_sharegpt_first_user_turn_and_multi_turn(tmp_path):
    path = _write_jsonl(tmp_path / "sharegpt.jsonl", [
        {"source": "glaive", "conversations": [
            {"from": "human", "value": "Call the weather tool for Paris"},
            {"from": "gpt", "value": "<tool_call>...</tool_call>"}]},
        {"conversations": [
            {"from": "system", "value": "Tools: search(q)"},
            {"from": "human", "value": "Find the bug"},
            {"from": "gpt", "value": "Searching"},
            {"from": "human", "value": "Now fix it"},
            {"from": "gpt", "value": "Done"}]},
    ])
    rows, stats = _read(path)
    assert rows[0].text == "Call the weather tool for Paris" and rows[0].turns == 1
    assert rows[0].domain == "agentic"
    # Multi-turn: everything up to and including the last user turn; the last reply is dropped.
    assert rows[1].text == ("system: Tools: search(q)\n\nuser: Find the bug\n\n"
                            "assistant: Searching\n\nuser: Now fix it")
    assert rows[1].turns == 4
    assert stats.malformed == 0


def test_openai_messages_with_content_parts(tmp_path):
    path = _write_jsonl(tmp_path / "messages.jsonl", [
        {"source": "ultrachat", "messages": [
            {"role": "user", "content": "Plan a trip"},
            {"role": "assistant", "content": "Sure"}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one"},
                                                   {"type": "image_url", "image_url": "x"},
                                                   {"type": "text", "text": "part two"}]}]},
    ])
    rows, _ = _read(path)
    assert rows[0].text == "Plan a trip" and rows[0].domain == "chat"
    assert rows[1].text == "part one\npart two"


def test_malformed_rows_are_counted_with_file_and_line(tmp_path):
    path = _write_jsonl(tmp_path / "mixed.jsonl", [
        {"prompt": "good one"},
        "{not json",
        {"conversations": [{"from": "gpt", "value": "no user turn"}]},
        {"messages": [{"role": "user"}]},
        {"prompt": ""},
        {"unrelated": 1},
        {"prompt": 42},
        {"prompt": "good two"},
    ])
    rows, stats = _read(path)
    assert [r.text for r in rows] == ["good one", "good two"]
    assert stats.rows == 2 and stats.malformed == 6
    assert len(stats.problems) == KEEP_PROBLEMS
    assert stats.problems[0].startswith(f"{path}:2: not JSON")
    assert stats.problems[1] == f"{path}:3: no user turn"
    assert f"{path}:5: empty prompt" in stats.problems
    assert "6 malformed row(s) skipped" in stats.describe()


def test_parquet_with_the_same_columns(tmp_path):
    turn = pa.struct([("from", pa.string()), ("value", pa.string())])
    table = pa.table({
        "conversations": pa.array([
            [{"from": "human", "value": "write a parser"}, {"from": "gpt", "value": "ok"}],
            [{"from": "gpt", "value": "only the model speaks"}],
            [{"from": "human", "value": "second prompt"}],
        ], type=pa.list_(turn)),
        "source": ["magicoder", "magicoder", None],
    })
    path = tmp_path / "train.parquet"
    pq.write_table(table, path, row_group_size=2)
    rows, stats = _read(path)
    assert [r.text for r in rows] == ["write a parser", "second prompt"]
    assert rows[0].source == "magicoder" and rows[1].source is None
    assert [r.line for r in rows] == [1, 3]
    assert stats.malformed == 1 and stats.problems == [f"{path}:2: no user turn"]


def test_parquet_messages_and_prompt_columns(tmp_path):
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    pq.write_table(pa.table({"messages": pa.array(
        [[{"role": "user", "content": "hi there"}]], type=pa.list_(msg))}), tmp_path / "m.parquet")
    pq.write_table(pa.table({"prompt": ["p1", "p2"], "domain": ["math", "math"]}),
                   tmp_path / "p.parquet")
    assert [r.text for r in _read(tmp_path / "m.parquet")[0]] == ["hi there"]
    assert [(r.text, r.domain) for r in _read(tmp_path / "p.parquet")[0]] == [("p1", "math"),
                                                                              ("p2", "math")]


def test_directory_of_mixed_formats_in_sorted_order(tmp_path):
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    _write_jsonl(folder / "b.jsonl", [{"prompt": "from b"}])
    _write_jsonl(folder / "sub" / "c.jsonl", [{"messages": [{"role": "user", "content": "c"}]}])
    pq.write_table(pa.table({"text": ["from a"]}), folder / "a.parquet")
    (folder / "README.md").write_text("not data")
    rows, stats = _read(folder)
    assert [r.text for r in rows] == ["from a", "from b", "c"]
    assert len(stats.files) == 3


def test_json_array_file(tmp_path):
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "one"}]},
        {"conversations": []},
        {"conversations": [{"from": "human", "value": "two"}]},
    ]))
    rows, stats = _read(path)
    assert [r.text for r in rows] == ["one", "two"] and stats.malformed == 1


@pytest.mark.parametrize("name,content", [
    ("train.csv", "prompt,answer\nhello,world\n"),
    ("train.jsonl", "prompt,answer\nhello,world\n"),
    ("train.jsonl", "".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(25))),
    ("train.parquet", "this is not parquet"),
])
def test_unknown_format_is_one_error_naming_the_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UnknownFormatError) as info:
        list(iter_rows(path))
    message = str(info.value)
    assert str(path) in message and "unknown training-data format" in message
    assert "\n" not in message


def test_parquet_without_known_columns_is_unknown(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"question": ["q"]}), path)
    with pytest.raises(UnknownFormatError, match="question"):
        list(iter_rows(path))


def test_missing_path_and_empty_directory(tmp_path):
    with pytest.raises(TrainingDataError, match="not found"):
        list(iter_rows(tmp_path / "nope.jsonl"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainingDataError, match="no training files"):
        list(iter_rows(tmp_path / "empty"))


def test_rows_are_streamed_not_loaded_whole(tmp_path):
    path = _write_jsonl(tmp_path / "big.jsonl", [{"prompt": f"row {i}"} for i in range(1000)])
    it = iter_rows(path)
    first = next(it)
    assert first.text == "row 0"
    # Truncate the file behind the reader: a reader that had loaded it whole would not notice.
    with path.open("r+") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.truncate(size // 2)
    remaining = sum(1 for _ in it)
    assert remaining < 999


def test_render_turns_requires_a_user_turn():
    with pytest.raises(ValueError, match="no user turn"):
        render_turns([("system", "s"), ("assistant", "a")])
    assert render_turns([("user", "only")]) == ("only", 1)
