"""SSE framing (actors/loadgen/sse.py) and the stream parsers behind httpx.MockTransport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from actors.loadgen.runner import run_load
from actors.loadgen.spec import LoadSpec, Prompt
from actors.loadgen.sse import SSEDecoder, event_data


def native_event(done: int, final: bool = False, verify: int | None = None) -> bytes:
    meta: dict[str, object] = {
        "id": "x", "finish_reason": {"type": "length", "length": done} if final else None,
        "prompt_tokens": 7, "completion_tokens": done, "cached_tokens": 0,
    }
    if final and verify is not None:
        meta["spec_verify_ct"] = verify
    return b"data: " + json.dumps({"text": "tok " * done, "meta_info": meta}).encode() + b"\n\n"


def native_stream(counts: list[int], verify: int | None = None) -> bytes:
    out = b""
    for j, c in enumerate(counts):
        out += native_event(c, final=j == len(counts) - 1, verify=verify)
    return out + b"data: [DONE]\n\n"


class ListStream(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes], gap_s: float = 0.0) -> None:
        self.pieces = pieces
        self.gap_s = gap_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for p in self.pieces:
            if self.gap_s:
                await asyncio.sleep(self.gap_s)
            yield p


def mock(pieces_for: Callable[[httpx.Request], list[bytes]], gap_s: float = 0.0,
         status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, stream=ListStream(pieces_for(request), gap_s),
                              headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def spec(n: int = 3, endpoint: str = "generate", **kw: object) -> LoadSpec:
    prompts = tuple(Prompt(f"p{i}", f"text {i}", "coding") for i in range(4))
    return LoadSpec(url="http://test", prompts=prompts, num_requests=n, endpoint=endpoint,
                    concurrency=kw.pop("concurrency", 2), **kw)  # type: ignore[arg-type]


# --- the decoder
def test_event_data_fields() -> None:
    assert event_data(b"data: {}") == b"{}"
    assert event_data(b"data:{}") == b"{}"
    assert event_data(b": keep-alive") is None
    assert event_data(b"event: message\nid: 3\ndata: a\ndata: b") == b"a\nb"
    assert event_data(b"retry: 10") is None


@pytest.mark.parametrize("sep", [b"\n\n", b"\r\n\r\n"])
def test_decoder_every_split_point(sep: bytes) -> None:
    raw = (b"data: one" + sep + b": comment" + sep + b"data: two" + sep
           + b"event: x\ndata: three".replace(b"\n", sep[: len(sep) // 2]) + sep)
    expected = [b"one", b"two", b"three"]
    for cut in range(len(raw) + 1):
        dec = SSEDecoder()
        got = dec.feed(raw[:cut]) + dec.feed(raw[cut:])
        assert got == expected, cut
        assert dec.pending == b""
    for cut1 in range(0, len(raw), 3):
        for cut2 in range(cut1, len(raw), 5):
            dec = SSEDecoder()
            got = dec.feed(raw[:cut1]) + dec.feed(raw[cut1:cut2]) + dec.feed(raw[cut2:])
            assert got == expected
    dec = SSEDecoder()  # byte by byte
    assert [p for i in range(len(raw)) for p in dec.feed(raw[i : i + 1])] == expected


def test_decoder_merged_events_and_partial_tail() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\ndata: b\n\ndata: c") == [b"a", b"b"]
    assert dec.pending == b"data: c"
    assert dec.feed(b"\n\n") == [b"c"]
    assert dec.feed(b"\n\n\n\n") == []


# --- the native parser's fast path against json.loads, at every read boundary
def _mixed_native_events(crlf: bool) -> list[bytes]:
    """Events as SGLang writes them (compact JSON, one line) mixed with what the general path
    handles: spaced JSON, a comment, an event of two lines, an event without new tokens, our
    key inside the text and in an earlier object (meta_info's is the last), then [DONE]."""
    def ev(done: int, compact: bool = True, final: bool = False) -> bytes:
        meta = {"id": "x", "finish_reason": {"type": "length"} if final else None,
                "prompt_tokens": 7, "completion_tokens": done}
        if done % 2:  # SGLang's order (a key after ours); else ours is the object's last
            meta["cached_tokens"] = 0
        obj = {"text": 'say \\"completion_tokens\\": 999 ' * (done % 2), "meta_info": meta}
        if done % 3 == 0:  # another object with the key, before meta_info
            obj = {"other": {"completion_tokens": 0}, **obj}
        sep = (",", ":") if compact else (", ", ": ")
        return b"data: " + json.dumps(obj, separators=sep).encode() + b"\n\n"

    events = [ev(1), ev(3), ev(4, compact=False), b": keep-alive\n\n", ev(6), ev(6),
              b"event: message\n" + ev(8), ev(9), ev(12), ev(13, final=True),
              b"data: [DONE]\n\n"]
    return [e.replace(b"\n", b"\r\n") for e in events] if crlf else events


def _expected(events: list[bytes], cuts: list[int]) -> tuple[list[float], list[int]]:
    """(stamp, new tokens) of every token event, from json.loads: an event is stamped with the
    read that holds its last byte."""
    times: list[float] = []
    tokens: list[int] = []
    end, prev = 0, 0
    for e in events:
        end += len(e)
        data = [line[5:] for line in e.replace(b"\r\n", b"\n").split(b"\n")
                if line.startswith(b"data:")]
        if not data or data[0].strip() == b"[DONE]":
            continue
        n = json.loads(b"\n".join(data))["meta_info"]["completion_tokens"]
        if n > prev:
            times.append(float(sum(1 for c in cuts if c < end)))  # reads before this one
            tokens.append(n - prev)
            prev = n
    return times, tokens


@pytest.mark.parametrize("crlf", [False, True])
def test_native_parser_matches_json_at_every_split(crlf: bool) -> None:
    import random

    from actors.loadgen.sinks import NativeSink

    events = _mixed_native_events(crlf)
    raw = b"".join(events)
    rng = random.Random(3)
    splits = [[c] for c in range(1, len(raw))] + [list(range(1, len(raw)))]
    splits += [sorted(rng.sample(range(1, len(raw)), k)) for k in (2, 5, 20) for _ in range(60)]
    for cuts in splits:
        tl, _ = feed_cuts(raw, cuts, NativeSink)
        times, tokens = _expected(events, cuts)
        assert (tl.chunk_times, tl.chunk_tokens) == (times, tokens), cuts
        assert tl.merged == sum(1 for a, b in zip(times, times[1:], strict=False) if a == b)
        assert tl.output_tokens == 13 and tl.finish_reason == "length" and tl.input_tokens == 7


# --- parsers through httpx.MockTransport
def split_everywhere(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 50, 100_000])
def test_native_stream_split_and_merged(size: int) -> None:
    counts = [1, 3, 4, 6, 7, 7, 9]  # 1-3 tokens per chunk; one chunk without new tokens
    body = native_stream(counts, verify=4)
    res = asyncio.run(run_load(spec(), transport=mock(lambda r: split_everywhere(body, size))))
    assert len(res.rows) == 3
    for row in res.rows:
        assert row["status"] == "ok", row["error"]
        assert row["output_tokens"] == 9 and row["input_tokens"] == 7
        assert row["spec_verify_ct"] == 4 and row["accept_length"] == pytest.approx(9 / 4)
        assert row["finish_reason"] == "length"
        # ITL entries: 9 tokens - 1 of the first chunk, whatever the read boundaries
        assert len(row["itl_s"]) == 8
        assert row["ttft_s"] is not None and row["ttft_s"] >= 0
        assert row["tpot_s"] is not None


def test_native_stream_timing_with_paced_chunks() -> None:
    body = native_stream([1, 3, 4])
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    res = asyncio.run(run_load(spec(n=1, concurrency=1),
                               transport=mock(lambda r: events, gap_s=0.03)))
    row = res.rows[0]
    assert row["status"] == "ok", row["error"]
    assert row["ttft_s"] == pytest.approx(0.03, abs=0.02)
    # chunk 2 carries 2 tokens: its ~30 ms gap is split in two entries of ~15 ms
    assert len(row["itl_s"]) == 3
    assert row["itl_s"][0] == pytest.approx(0.015, abs=0.01)
    assert row["itl_s"][0] == row["itl_s"][1]


@pytest.mark.parametrize("bad", [
    b'data: {"text": "tok", "meta_info": {"completion_tokens": \n\n',  # truncated JSON
    b"data: not json at all\n\n",
    b'data: {"error": {"message": "boom"}}\n\n',
    b'data: {"text": "x"}\n\n',  # no meta_info
])
def test_broken_event_is_an_error_row_not_a_failed_cell(bad: bytes) -> None:
    good = native_stream([1, 2, 3])

    def pieces(request: httpx.Request) -> list[bytes]:
        if b"text 1" in request.content or b"text 2" in request.content:
            first = native_event(1)
            return [first, bad[:5], bad[5:], native_stream([2, 3])]
        return [good]

    res = asyncio.run(run_load(spec(n=4), transport=mock(pieces)))
    by_status = [r["status"] for r in res.rows]
    assert by_status.count("error") == 2 and by_status.count("ok") == 2
    for r in res.rows:
        if r["status"] == "error":
            assert r["error"]
            assert r["tpot_s"] is None


def test_truncated_stream_is_an_error() -> None:
    body = native_stream([1, 2, 3])
    cut = body[: body.index(b"[DONE]") - 60]  # ends inside the final event
    res = asyncio.run(run_load(spec(n=1), transport=mock(lambda r: [cut])))
    assert res.rows[0]["status"] == "error"
    assert "ended" in res.rows[0]["error"]


def chat_stream(deltas: list[str], continuous: bool, final_usage: int) -> bytes:
    out = b""
    done = 0
    for j, d in enumerate(deltas):
        done += len(d.split())
        chunk: dict[str, object] = {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": d},
                         "finish_reason": "length" if j == len(deltas) - 1 else None}],
        }
        if continuous:
            chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": done}
        out += b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n"
    usage = {"object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 5, "completion_tokens": final_usage}}
    return out + b"data: " + json.dumps(usage).encode() + b"\r\n\r\ndata: [DONE]\r\n\r\n"


@pytest.mark.parametrize("continuous", [True, False])
def test_chat_stream_usage(continuous: bool) -> None:
    body = chat_stream(["a", "b c", "d e f"], continuous, final_usage=6)
    seen: list[dict[str, object]] = []

    def pieces(request: httpx.Request) -> list[bytes]:
        seen.append(json.loads(request.content))
        return split_everywhere(body, 9)

    res = asyncio.run(run_load(spec(n=2, endpoint="chat", model="m1"), transport=mock(pieces)))
    assert seen[0]["model"] == "m1" and seen[0]["stream"] is True
    assert request_path_ok(seen[0])
    for row in res.rows:
        assert row["status"] == "ok", row["error"]
        assert row["output_tokens"] == 6 and row["input_tokens"] == 5
        assert row["finish_reason"] == "length"
        assert row["accept_length"] is None
        # with per-chunk usage the 2- and 3-token chunks are split; without, 1 per delta
        assert len(row["itl_s"]) == (5 if continuous else 2)


def request_path_ok(body: dict[str, object]) -> bool:
    opts = body.get("stream_options")
    return isinstance(opts, dict) and opts.get("include_usage") is True


def test_http_error_status_is_an_error_row() -> None:
    res = asyncio.run(run_load(spec(n=2), transport=mock(lambda r: [b"overloaded"], status=503)))
    assert all(r["status"] == "error" and "HTTP 503" in r["error"] for r in res.rows)


def test_chat_tool_call_deltas_are_output() -> None:
    """SGLang streams a function call as ``delta.tool_calls`` with no content (0.5.23
    srt/entrypoints/openai/serving_chat.py): those chunks are output tokens too."""
    first = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    calls = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": arg}}]},
        "finish_reason": "tool_calls" if j == 2 else None}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2 * (j + 1)}}
        for j, arg in enumerate(['{"a"', ': 1', "}"])]
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 6}}
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n"
                    for c in [first, *calls, usage]) + b"data: [DONE]\n\n"
    res = asyncio.run(run_load(spec(n=1, endpoint="chat"), transport=mock(lambda r: [body])))
    row = res.rows[0]
    assert row["status"] == "ok", row["error"]
    assert row["chunk_tokens"] == [2, 2, 2] and row["output_tokens"] == 6
    assert row["ttft_s"] is not None and row["finish_reason"] == "tool_calls"


def feed_cuts(raw: bytes, cuts: list[int], sink_cls: type) -> tuple[Any, Any]:
    """Feed ``raw`` to a new `sink_cls` (NativeSink, ChatSink) in reads split at ``cuts``; read r
    is stamped ``float(r)``: (its Timeline, the sink)."""
    from actors.loadgen.timeline import Timeline

    tl = Timeline(0.0)
    sink = sink_cls(tl)
    bounds = [0, *cuts, len(raw)]
    for r, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        sink.feed(raw[a:b], float(r))
    sink.finish()
    return tl, sink
