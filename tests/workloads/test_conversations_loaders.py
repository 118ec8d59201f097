"""Loaders of conversation files: every format on good and malformed files, format detection,
one clear error for an unknown file, streaming (memory bounded), and the shipped data."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from workloads.conversations import (
    ConversationFormatError,
    LoadReport,
    detect_format,
    iter_conversations,
    load_conversations,
)
from workloads.conversations_data import AGENTIC, SPEED_BENCH_SAMPLE


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# --- SGLang agentic trace ------------------------------------------------------------------
def trace_doc(n: int) -> dict[str, Any]:
    convs = []
    for i in range(n):
        convs.append([
            {"messages": [{"role": "system", "content": f"sys {i}"},
                          {"role": "user", "content": f"task {i}"}], "prompt_tokens": 100 + i},
            {"messages": [], "prompt_tokens": 0},  # no new messages: skipped, as SGLang does
            {"messages": [{"role": "tool", "content": f"obs {i}.1"}], "prompt_tokens": 200 + i},
            {"messages": [{"role": "user", "content": f"more {i}"},
                          {"role": "tool", "content": f"obs {i}.2"}], "prompt_tokens": 300 + i},
        ])
    return {"metadata": {"source": "test", "conversations": "not this key"},
            "conversations": convs}


@pytest.mark.parametrize("indent", [None, 2])
def test_sglang_agentic_trace(tmp_path: Path, indent: int | None) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace_doc(3), indent=indent))
    assert detect_format(path) == ("sglang_agentic", "trace")
    convs, rep = load_conversations(path)
    assert rep.conversations == 3 and rep.malformed == 0
    c = convs[1]
    assert c.system == "sys 1"
    assert [t.prompt_tokens for t in c.turns] == [101, 201, 301]
    assert [[m["content"] for m in t.messages] for t in c.turns] == [
        ["task 1"], ["obs 1.1"], ["more 1", "obs 1.2"]]
    assert all(t.reply is None for t in c.turns)  # SGLang's trace records no replies


def test_sglang_agentic_trace_malformed_and_truncated(tmp_path: Path) -> None:
    doc = trace_doc(4)
    doc["conversations"][1][2]["messages"][0] = {"content": "no role"}
    doc["conversations"][2] = [{"messages": [], "prompt_tokens": 5}]
    text = json.dumps(doc, indent=1)
    path = tmp_path / "trace.json"
    path.write_text(text[: text.index('"obs 3.2"')])  # the file breaks off in conversation 3
    rep = LoadReport(str(path))
    convs = list(iter_conversations(path, report=rep))
    assert [c.turns[0].messages[0]["content"] for c in convs] == ["task 0"]
    assert rep.malformed == 3
    assert rep.examples[0].startswith("trace.json:item 1: turn 2 messages[0]: message without")
    assert rep.examples[1].startswith("trace.json:item 2: no turn with messages")
    assert "JSON syntax error" in rep.examples[2]
    assert "3 malformed records" in rep.summary()


# --- Mooncake ------------------------------------------------------------------------------
def test_mooncake_rows_share_prefixes_by_hash_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", [
        {"timestamp": 0, "input_length": 1300, "output_length": 52, "hash_ids": [46, 47, 48]},
        {"timestamp": 1500, "input_length": 1100, "output_length": 26, "hash_ids": [46, 47, 9]},
        "{not json",
        {"timestamp": 2500, "output_length": 3, "hash_ids": [1]},
        {"timestamp": 3000, "input_length": 700, "output_length": 8},
    ])
    rep = LoadReport(str(path))
    convs = list(iter_conversations(path, report=rep))
    assert rep.format == "mooncake"
    assert [c.arrival_s for c in convs] == [0.0, 1.5, 3.0]
    assert [c.turns[0].output_tokens for c in convs] == [52, 26, 8]
    a, b, c = (x.turns[0].messages[0]["content"] for x in convs)
    assert (len(a), len(b), len(c)) == (1300 * 4, 1100 * 4, 700 * 4)  # 4 chars per token
    block = 512 * 4
    assert a[: 2 * block] == b[: 2 * block]  # hash ids 46, 47 shared
    assert a[2 * block: 2 * block + 50] != b[2 * block: 2 * block + 50]  # 48 vs 9
    assert rep.malformed == 2
    assert rep.examples[0].startswith("mc.jsonl:3: not JSON")
    assert rep.examples[1] == "mc.jsonl:4: input_length is not a positive integer"


# --- ShareGPT and OpenAI messages -----------------------------------------------------------
SHAREGPT = [
    {"id": "a", "conversations": [
        {"from": "system", "value": "be brief"}, {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "hello"}, {"from": "human", "value": "bye"},
        {"from": "gpt", "value": "ciao"}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "I speak first"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "q"},
                                  {"from": "alien", "value": "?"}]},
    {"id": "d", "conversations": [{"from": "human", "value": "only a question"}]},
]


@pytest.mark.parametrize("container", ["jsonl", "array"])
def test_sharegpt(tmp_path: Path, container: str) -> None:
    path = tmp_path / "sg.json"
    if container == "jsonl":
        write_jsonl(path, SHAREGPT)
    else:
        path.write_text(json.dumps(SHAREGPT, indent=2))
    assert detect_format(path) == ("sharegpt", container)
    rep = LoadReport(str(path))
    convs = list(iter_conversations(path, report=rep))
    assert [c.conversation_id for c in convs] == ["a", "d"]
    a = convs[0]
    assert a.system == "be brief"
    assert [(t.messages[0]["content"], t.reply["content"] if t.reply else None)
            for t in a.turns] == [("hi", "hello"), ("bye", "ciao")]
    assert convs[1].turns[0].reply is None
    assert rep.malformed == 2
    where = "sg.json:2" if container == "jsonl" else "sg.json:item 1"
    assert rep.examples[0] == (f"{where}: an assistant message with no user/tool message "
                               "before it")
    assert "unknown speaker 'alien'" in rep.examples[1]


def test_openai_messages_with_tools(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "grep", "parameters": {}}}
    call = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    path = write_jsonl(tmp_path / "oa.jsonl", [
        {"id": "x", "domain": "coding", "tools": [tool], "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": "find it"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py:1: it"},
            {"role": "assistant", "content": "found"}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": "ok"}], "tools": "grep"},
    ])
    rep = LoadReport(str(path))
    convs = list(iter_conversations(path, report=rep))
    assert len(convs) == 1 and rep.malformed == 2
    c = convs[0]
    assert (c.conversation_id, c.domain, c.tools) == ("x", "coding", (tool,))
    assert c.turns[0].reply == {"role": "assistant", "content": None, "tool_calls": [call]}
    assert c.turns[1].messages[0]["tool_call_id"] == "c1"
    assert rep.examples == [
        "oa.jsonl:2: messages[0]: content is neither a string nor a list of parts",
        "oa.jsonl:3: tools is not a list of objects"]


# --- SPEED-Bench ---------------------------------------------------------------------------
def test_speed_bench_sample() -> None:
    convs, rep = load_conversations(SPEED_BENCH_SAMPLE)
    assert rep.format == "speed_bench" and rep.malformed == 0 and len(convs) == 12
    assert convs[0].conversation_id == "sb-000" and convs[0].domain == "coding"
    rows = [json.loads(line) for line in SPEED_BENCH_SAMPLE.read_text().splitlines()]
    assert [len(c.turns) for c in convs] == [len(r["turns"]) for r in rows]
    assert [c.domain for c in convs] == [r["category"] for r in rows]
    assert any(len(c.turns) > 1 for c in convs)


def test_speed_bench_malformed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "sb.jsonl", [
        {"question_id": 1, "category": "math", "turns": ["2+2?"]},
        {"question_id": 2, "category": "math", "turns": []},
        {"question_id": 3, "category": "qa", "turns": ["a", ""]},
    ])
    rep = LoadReport(str(path))
    assert [c.conversation_id for c in iter_conversations(path, report=rep)] == ["1"]
    assert rep.malformed == 2 and rep.examples[0].startswith("sb.jsonl:2: turns")


# --- bad files -----------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["", "   \n", "hello\n", '{"prompt": "x"}\n', "[1, 2]",
                                     '{\n "data": [1]\n}\n'])
def test_unknown_format_is_one_line_naming_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "weird.jsonl"
    path.write_text(content)
    with pytest.raises(ConversationFormatError) as exc:
        list(iter_conversations(path))
    msg = str(exc.value)
    assert str(path) in msg and "\n" not in msg


def test_missing_file_and_wrong_declared_format(tmp_path: Path) -> None:
    with pytest.raises(ConversationFormatError, match="not found"):
        load_conversations(tmp_path / "nope.jsonl")
    with pytest.raises(ConversationFormatError, match="is speed_bench, not mooncake"):
        load_conversations(SPEED_BENCH_SAMPLE, fmt="mooncake")
    path = write_jsonl(tmp_path / "bad.jsonl", [{"turns": []}, "{"])
    with pytest.raises(ConversationFormatError, match="no usable conversation.*2 malformed"):
        load_conversations(path)


# --- streaming -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["trace", "jsonl"])
def test_reading_is_streaming(tmp_path: Path, kind: str) -> None:
    """The first conversation of a ~30 MB file comes out with a small fraction of the file in
    memory."""
    big = "x" * 10_000
    path = tmp_path / f"big.{kind}"
    with path.open("w") as f:
        if kind == "trace":
            f.write('{"conversations": [')
            for i in range(3000):
                f.write(("," if i else "") + json.dumps(
                    [{"messages": [{"role": "user", "content": f"{i} {big}"}]}]))
            f.write("]}")
        else:
            for i in range(3000):
                f.write(json.dumps({"turns": [f"{i} {big}"], "category": "qa"}) + "\n")
    size = path.stat().st_size
    assert size > 29_000_000
    tracemalloc.start()
    try:
        it = iter_conversations(path)
        first = next(it)
        second = next(it)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first.turns[0].messages[0]["content"].startswith("0 x")
    assert second.turns[0].messages[0]["content"].startswith("1 x")
    assert peak < size / 10, (peak, size)


# --- the shipped agentic conversations --------------------------------------------------------
def test_shipped_agentic_conversations() -> None:
    assert AGENTIC.stat().st_size < 3_000_000
    convs, rep = load_conversations(AGENTIC)
    assert rep.malformed == 0 and len(convs) >= 30
    finals = []
    for c in convs:
        assert 5 <= len(c.turns) <= 20, c.conversation_id
        names = {t["function"]["name"] for t in c.tools}
        assert {"read_file", "grep", "run_tests", "apply_patch"} <= names
        chars = len(c.system or "") + len(json.dumps(list(c.tools)))
        for k, t in enumerate(c.turns):
            chars += sum(len(m["content"]) for m in t.messages)
            assert t.reply is not None
            chars += len(t.reply["content"])
            if k > 0:
                assert [m["role"] for m in t.messages] == ["tool"]
            if k < len(c.turns) - 1:  # every reply but the summary calls one tool, as JSON
                m = re.search(r"<tool_call>\n(.*)\n</tool_call>", t.reply["content"], re.S)
                assert m is not None, (c.conversation_id, k)
                call = json.loads(m.group(1))
                assert call["name"] in names and isinstance(call["arguments"], dict)
        finals.append(chars / 4)
    assert min(finals) < 3_000 and max(finals) > 30_000
    assert sum(1 for f in finals if f > 16_000) >= 10


def test_a_broken_first_row_does_not_hide_the_format(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "sb.jsonl", [
        '{"question_id": 1, "turns": ["cut off',
        {"question_id": 2, "category": "qa", "turns": ["ok?"]},
    ])
    rep = LoadReport(str(path))
    assert [c.conversation_id for c in iter_conversations(path, report=rep)] == ["2"]
    assert rep.format == "speed_bench" and rep.examples[0].startswith("sb.jsonl:1: not JSON")


def test_pretty_printed_trace_with_one_line_messages(tmp_path: Path) -> None:
    """Lines of a multi-line document that happen to parse alone do not make it JSONL."""
    path = tmp_path / "trace.json"
    path.write_text('{\n"conversations": [\n[\n{"messages": [\n'
                    '{"role": "user", "content": "a"}\n]}\n]\n]\n}\n')
    assert detect_format(path) == ("sglang_agentic", "trace")
    assert [c.turns[0].messages[0]["content"] for c in iter_conversations(path)] == ["a"]
