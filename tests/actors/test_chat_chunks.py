"""Which chunks of an OpenAI chat stream carry tokens (actors/loadgen/sinks.py ``ChatSink``).

The fixtures are real streams, byte for byte, captured from the engines on the 2-core CPU
machine with the tiny random model (``scripts/tiny_models.py``), greedy:

* ``vllm-0.32.0-chat-usage.sse``: vLLM 0.32.0, ``max_tokens`` 8, ``stream_options:
  {"include_usage": true, "continuous_usage_stats": true}`` (the body ``request_body`` sends). A
  role-only opening chunk with usage completion_tokens 0, then one chunk per token, three of
  them ``"content": ""`` (tokens that end inside a UTF-8 character), cumulative usage on each,
  then a ``choices: []`` usage chunk.
* ``vllm-0.32.0-chat.sse``: the same request without ``stream_options``.
* ``sglang-0.5.23-chat-usage.sse``: SGLang 0.5.23, ``max_tokens`` 6, the same stream_options:
  no empty-content chunks, the held-back tokens merged (usage 2 -> 6 in one chunk), no usage on
  the role and finish chunks.
* ``sglang-0.5.23-chat.sse``: the same without stream_options (3 chunks for 6 tokens).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from actors.loadgen.conversation import ChatReplySink
from actors.loadgen.runner import run_load
from actors.loadgen.sinks import ChatSink
from actors.loadgen.timeline import Timeline
from specgrid_metrics.acceptance import accept_length_decode
from tests.actors.test_sse import feed_cuts as _feed
from tests.actors.test_sse import mock, spec, split_everywhere

FIXTURES = Path(__file__).parent / "fixtures"

# fixture -> (tokens carried by each event, in order; output_tokens; input_tokens; finish)
CAPTURES: dict[str, tuple[list[int], int, int | None, str]] = {
    # role, 8 token chunks (3 of them ""), usage-only
    "vllm-0.32.0-chat-usage.sse": ([0, 1, 1, 1, 1, 1, 1, 1, 1, 0], 8, 12, "length"),
    # role, 8 token chunks (3 of them ""); no usage: output = the chunks' count
    "vllm-0.32.0-chat.sse": ([0, 1, 1, 1, 1, 1, 1, 1, 1], 8, None, "length"),
    # role (no usage), " T" 1, " `" 2, "...and" 6, finish chunk (no usage), usage-only
    "sglang-0.5.23-chat-usage.sse": ([0, 1, 1, 4, 0, 0], 6, 12, "length"),
    # without per-chunk usage SGLang's merged chunk counts one: 3 of the 6 tokens, no total
    "sglang-0.5.23-chat.sse": ([0, 1, 1, 1, 0], 3, None, "length"),
}


def events_of(raw: bytes) -> list[bytes]:
    """The raw events (each with its blank line), [DONE] dropped."""
    out = [e + b"\n\n" for e in raw.split(b"\n\n") if e.strip()]
    assert out[-1] == b"data: [DONE]\n\n"
    return out[:-1]


def feed_cuts(raw: bytes, cuts: list[int], sink_cls: type[ChatSink] = ChatSink
              ) -> tuple[Timeline, ChatSink]:
    """test_sse's feed_cuts with a chat sink."""
    return _feed(raw, cuts, sink_cls)


def expected(events: list[bytes], per_event: list[int], cuts: list[int]
             ) -> tuple[list[float], list[int]]:
    """(stamp, tokens) of every event that carries tokens: an event is stamped with the read
    that holds its last byte."""
    times: list[float] = []
    tokens: list[int] = []
    end = 0
    for e, k in zip(events, per_event, strict=True):
        end += len(e)
        if k:
            times.append(float(sum(1 for c in cuts if c < end)))
            tokens.append(k)
    return times, tokens


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real_capture_at_every_split_point(name: str) -> None:
    raw = (FIXTURES / name).read_bytes()
    per_event, output, prompt, finish = CAPTURES[name]
    events = events_of(raw)
    assert len(events) == len(per_event)
    splits = [[c] for c in range(1, len(raw))] + [list(range(1, len(raw)))]  # + byte by byte
    for cuts in splits:
        tl, _ = feed_cuts(raw, cuts)
        assert (tl.chunk_times, tl.chunk_tokens) == expected(events, per_event, cuts), cuts
        assert tl.output_tokens == output and tl.input_tokens == prompt
        assert tl.finish_reason == finish


def test_vllm_usage_capture_ttft_and_token_sum() -> None:
    """The role chunk carries no token; the first token chunk is TTFT; the three
    ``"content": ""`` chunks each carry one; Σ chunk tokens == the server's total."""
    raw = (FIXTURES / "vllm-0.32.0-chat-usage.sse").read_bytes()
    events = events_of(raw)
    assert b'"role":"assistant","content":""' in events[0]
    assert sum(b'"delta":{"content":""}' in e for e in events) == 3
    tl, _ = feed_cuts(raw, list(range(1, len(raw))))  # one read per byte
    stamps = [float(sum(len(e) for e in events[: i + 1]) - 1) for i in range(len(events))]
    assert tl.chunk_times[0] == stamps[1]  # " T", not the role chunk
    assert tl.chunk_times == stamps[1:9]  # every token chunk, the empty ones included
    assert tl.chunk_tokens == [1] * 8
    assert sum(tl.chunk_tokens) == tl.output_tokens == 8


def test_reply_sink_shares_the_rule() -> None:
    """The conversation runner's sink counts as ChatSink does and keeps the reply text."""
    raw = (FIXTURES / "vllm-0.32.0-chat-usage.sse").read_bytes()
    tl, sink = feed_cuts(raw, [], ChatReplySink)
    assert tl.chunk_tokens == [1] * 8 and tl.output_tokens == 8
    assert isinstance(sink, ChatReplySink)
    assert sink.text == " T `\ufffd\ufffd\ufffdandon T"


@pytest.mark.parametrize("name", ["vllm-0.32.0-chat-usage.sse", "sglang-0.5.23-chat-usage.sse"])
def test_real_capture_through_the_runner(name: str) -> None:
    raw = (FIXTURES / name).read_bytes()
    res = asyncio.run(run_load(spec(n=4, endpoint="chat", model="m"),
                               transport=mock(lambda r: split_everywhere(raw, 37))))
    assert len(res.rows) == 4
    for row in res.rows:
        assert row["status"] == "ok", row["error"]
        assert row["ttft_s"] is not None and row["ttft_s"] >= 0
        assert sum(row["chunk_tokens"]) == row["output_tokens"] == CAPTURES[name][1]


# --- constructed streams (vLLM's shape) where the old rule ("content is truthy") fails
def chunk(delta: dict[str, object], ct: int | None = None, finish: str | None = None,
          prompt: int = 5) -> bytes:
    obj: dict[str, object] = {"id": "chatcmpl-x", "object": "chat.completion.chunk",
                              "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                           "finish_reason": finish}]}
    if ct is not None:
        obj["usage"] = {"prompt_tokens": prompt, "total_tokens": prompt + ct,
                        "completion_tokens": ct}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def tail(total: int) -> bytes:
    usage = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 5, "total_tokens": 5 + total, "completion_tokens": total}}
    return b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"


def paced(events: list[bytes]) -> tuple[Timeline, ChatSink]:
    """Event i arrives at t = i (its own read)."""
    tl = Timeline(0.0)
    sink = ChatSink(tl)
    for i, e in enumerate(events):
        sink.feed(e, float(i))
    sink.finish()
    return tl, sink


@pytest.mark.parametrize("continuous", [False, True])
def test_empty_content_deltas_are_tokens(continuous: bool) -> None:
    """64 tokens whose text ends inside a UTF-8 character until the 40th: vLLM streams
    ``"content": ""`` for each. The first of them is the first token, with or without
    per-chunk usage (the old rule gave no TTFT here and 25 of 64 chunk tokens)."""
    texts = [""] * 39 + ["\ufffd\ufffdx"] + [""] * 23 + ["y"]
    events = [chunk({"role": "assistant", "content": ""}, 0 if continuous else None)]
    events += [chunk({"content": s}, j + 1 if continuous else None,
                     "length" if j == 63 else None) for j, s in enumerate(texts)]
    tl, _ = paced([*events, tail(64)])
    assert tl.chunk_times == [float(i) for i in range(1, 65)]  # TTFT: event 1, not 0 (role)
    assert tl.chunk_tokens == [1] * 64
    assert sum(tl.chunk_tokens) == tl.output_tokens == 64
    assert tl.input_tokens == 5 and tl.finish_reason == "length"


def test_empty_delta_whose_usage_rose_carries_tokens() -> None:
    """vLLM sends ``DeltaMessage()`` (``"delta": {}``) when a parser holds a token back and at
    a finish; with per-chunk usage its rise is what it carries. Chunks whose usage did not
    rise carry none."""
    events = [chunk({"role": "assistant", "content": ""}, 0), chunk({}, 1),
              chunk({"content": "a"}, 3), chunk({"content": ""}, 3), chunk({}, 5, "stop")]
    tl, _ = paced([*events, tail(5)])
    assert (tl.chunk_times, tl.chunk_tokens) == ([1.0, 2.0, 4.0], [1, 2, 2])
    assert tl.output_tokens == 5


def test_role_chunk_is_not_a_token_without_usage() -> None:
    events = [chunk({"role": "assistant", "content": ""}),
              chunk({"role": "assistant", "reasoning_content": None, "content": ""}),
              chunk({"role": "assistant"}), chunk({"reasoning_content": None}),
              chunk({"content": None}), chunk({"reasoning": "hm"}),
              chunk({"reasoning_content": "", "content": None}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}),
              chunk({"content": ""}, finish="stop")]
    tl, _ = paced(events + [b"data: [DONE]\n\n"])
    assert tl.chunk_times == [5.0, 6.0, 7.0, 8.0] and tl.chunk_tokens == [1, 1, 1, 1]
    assert tl.output_tokens == 4  # no usage at all: the chunks' count


def test_tokens_the_chunks_never_carried_get_no_arrival() -> None:
    """SGLang drops the text of trailing tokens that never complete a character and puts no
    usage on its finish chunk: the final total (8) exceeds what the chunks carried (6). The
    total is kept; no arrival is invented for the other 2. Once per-chunk usage was seen, a
    chunk without usage carries nothing."""
    events = [chunk({"reasoning_content": None, "role": "assistant", "content": ""}),
              chunk({"reasoning_content": None, "content": " T"}, 1),
              chunk({"reasoning_content": None, "content": "ab"}, 6),
              chunk({"reasoning_content": None, "content": "late"}),  # no usage: none
              chunk({"reasoning_content": None}, finish="length")]
    tl, _ = paced([*events, tail(8)])
    assert (tl.chunk_times, tl.chunk_tokens) == ([1.0, 2.0], [1, 5])
    assert tl.output_tokens == 8


def test_no_token_chunk_at_all_has_no_ttft() -> None:
    events = [chunk({"reasoning_content": None, "role": "assistant", "content": ""}),
              chunk({"reasoning_content": None}, finish="length")]
    res_tl, _ = paced([*events, tail(4)])
    assert res_tl.chunk_times == [] and res_tl.output_tokens == 4


def test_runner_row_for_empty_content_stream() -> None:
    """Through the runner: the row has a TTFT and Σ chunk_tokens == output_tokens."""
    events = [chunk({"role": "assistant", "content": ""}, 0)]
    events += [chunk({"content": ""}, j + 1, "length" if j == 9 else None) for j in range(10)]
    body = b"".join(events) + tail(10)
    res = asyncio.run(run_load(spec(n=2, endpoint="chat", model="m"),
                               transport=mock(lambda r: [body])))
    for row in res.rows:
        assert row["status"] == "ok", row["error"]
        assert row["ttft_s"] is not None
        assert row["chunk_tokens"] == [1] * 10 and row["output_tokens"] == 10


def test_vllm_per_request_speculative_metrics_give_the_verify_steps() -> None:
    """A real vLLM 0.32.0 stream (trained target + draft model, 4 tokens per step, started
    with --per-request-spec-decode-metrics summary): the final usage chunk's
    metrics.speculative_decoding.num_spec_steps is the request's verify count, and the
    decode-only accept length from it is vLLM's own mean_acceptance_length."""
    raw = (FIXTURES / "vllm-0.32.0-chat-spec-usage.sse").read_bytes()
    final = json.loads(events_of(raw)[-1].removeprefix(b"data: "))
    server = final["metrics"]["speculative_decoding"]
    tl, _ = feed_cuts(raw, list(range(1, len(raw), 7)))
    assert tl.output_tokens == 8 and tl.spec_verify_ct == server["num_spec_steps"] == 5
    assert accept_length_decode(tl.output_tokens, tl.spec_verify_ct) == pytest.approx(
        server["mean_acceptance_length"])
    # and its acceptance histogram: 3 steps accepted no draft, 2 one
    assert tl.accept_histogram == server["acceptance_histogram"] == [3, 2, 0, 0, 0]
    # without the flag (every other capture) the count stays unknown
    plain, _ = feed_cuts((FIXTURES / "vllm-0.32.0-chat-usage.sse").read_bytes(), [10])
    assert plain.spec_verify_ct is None and plain.accept_histogram is None


SGLANG_SGLEXT = (
    b'data: {"id":"abc","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":null,"sglext":{"spec_tokens_details":{"spec_accept_rate":0.5,'
    b'"spec_accept_length":2.0,"spec_cap_length":0.0,"spec_block_accept_length":0.0,'
    b'"spec_num_correct_drafts":3,"spec_num_proposed_drafts":6,"spec_verify_ct":3,'
    b'"spec_correct_drafts_histogram":[1,1,1],"spec_cap_lens_histogram":[]}}}\n\n')
"""SGLang 0.5.23's sglext chunk as its own serializer writes it (entrypoints/openai/protocol.py
ChatCompletionStreamResponse.model_dump_json(), run in the engine environment), which
serving_chat.py sends after the finish chunk when the body asks return_spec_tokens_details."""


def test_sglang_spec_tokens_details_give_the_verify_steps_and_histogram() -> None:
    fixture = (FIXTURES / "sglang-0.5.23-chat-usage.sse").read_bytes()
    events = events_of(fixture)
    at = next(i for i, e in enumerate(events) if b'"choices":[]' in e)  # the usage chunk
    raw = b"".join([*events[:at], SGLANG_SGLEXT, *events[at:], b"data: [DONE]\n\n"])
    tl, _ = feed_cuts(raw, list(range(1, len(raw), 11)))
    assert tl.spec_verify_ct == 3 and tl.accept_histogram == [1, 1, 1]
