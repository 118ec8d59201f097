"""What a request row records of its output, for the losslessness check: the text of real
captured streams (vLLM's and SGLang's chat streams, SGLang's native /generate stream), its
blake2b-128 hash and length, and the text itself only at temperature 0."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from actors.loadgen.conversation import ChatReplySink
from actors.loadgen.rows import OUTPUT_TEXT_CHARS, request_row
from actors.loadgen.sinks import ChatSink, NativeSink
from actors.loadgen.timeline import Timeline
from tests.actors.test_sse import feed_cuts, spec

FIXTURES = Path(__file__).parent / "fixtures"
SGLANG_RECORDING = (Path(__file__).parents[1] / "engines" / "sim" / "fixtures" / "sglang-0.5.23"
                    / "generate_stream.json")

# the output texts, read off the captures by hand (the tiny random model's tokens; vLLM and
# SGLang detokenize bytes that end inside a UTF-8 character as U+FFFD)
CHAT_TEXT = {
    "vllm-0.32.0-chat-usage.sse": " T `\ufffd\ufffd\ufffdandon T",
    "vllm-0.32.0-chat.sse": " T `\ufffd\ufffd\ufffdandon T",
    "sglang-0.5.23-chat-usage.sse": " T `\ufffd\ufffd\ufffdand",
}
NATIVE_TEXT = " comonherherherher"


def blake(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def native_capture() -> bytes:
    """SGLang 0.5.23's recorded /generate stream as the bytes it sent (compact JSON events)."""
    events = json.loads(SGLANG_RECORDING.read_text())["events"]
    return b"".join(b"data: " + (e.encode() if isinstance(e, str) else
                                 json.dumps(e, separators=(",", ":")).encode()) + b"\n\n"
                    for e in events)


@pytest.mark.parametrize("name", sorted(CHAT_TEXT))
@pytest.mark.parametrize("cuts", [[], [7, 300, 301]])
def test_chat_capture_text_and_hash(name: str, cuts: list[int]) -> None:
    raw = (FIXTURES / name).read_bytes()
    tl, _ = feed_cuts(raw, [c for c in cuts if c < len(raw)], ChatSink)
    assert tl.output_text == CHAT_TEXT[name]
    row = request_row(spec(temperature=0.0), 0, 0, tl, 0.0)
    assert row["output_hash"] == blake(CHAT_TEXT[name])
    assert row["output_chars"] == len(CHAT_TEXT[name])
    assert row["output_text"] == CHAT_TEXT[name]


def test_native_capture_text_and_hash_come_from_the_final_event() -> None:
    tl, _ = feed_cuts(native_capture(), [40, 41, 900], NativeSink)
    assert tl.error is None and tl.output_tokens == 6
    row = request_row(spec(temperature=0.0), 0, 0, tl, 0.0)
    assert row["output_text"] == NATIVE_TEXT
    assert row["output_hash"] == blake(NATIVE_TEXT) and row["output_chars"] == 18


def test_sampled_requests_keep_the_hash_but_not_the_text() -> None:
    tl, _ = feed_cuts(native_capture(), [], NativeSink)
    row = request_row(spec(temperature=0.7), 0, 0, tl, 0.0)
    assert row["output_hash"] == blake(NATIVE_TEXT) and row["output_text"] is None


def test_a_failed_request_records_no_output() -> None:
    tl = Timeline(0.0)
    tl.output_text, tl.error = "partial", "timeout: no complete response within 1 s"
    tl.end = 1.0
    row = request_row(spec(temperature=0.0), 0, 0, tl, 0.0)
    assert (row["output_hash"], row["output_chars"], row["output_text"]) == (None, None, None)


def test_long_greedy_text_is_cut_but_hashed_whole() -> None:
    tl = Timeline(0.0)
    tl.output_text, tl.sent, tl.end = "ab" * OUTPUT_TEXT_CHARS, 0.0, 1.0
    row = request_row(spec(temperature=0.0), 0, 0, tl, 0.0)
    assert len(row["output_text"]) == OUTPUT_TEXT_CHARS and row["output_chars"] == 32768
    assert row["output_hash"] == blake("ab" * OUTPUT_TEXT_CHARS)


def test_conversation_reply_text_is_the_content_once() -> None:
    raw = (FIXTURES / "vllm-0.32.0-chat-usage.sse").read_bytes()
    tl, sink = feed_cuts(raw, [], ChatReplySink)
    assert sink.text == CHAT_TEXT["vllm-0.32.0-chat-usage.sse"] == tl.output_text
