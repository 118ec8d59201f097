"""Bytes on the wire: SSE chunks of SGLang's native /generate stream and of the OpenAI-compatible
endpoints, built by string templates (the hot path: no json.dumps of cumulative text).

Every token string is plain ASCII without quotes or backslashes (engines/sim/text.py), so text
can be placed inside a JSON string as is; identifiers that come from clients (``rid``, the model
name) are JSON-encoded once per request.

Native stream (SGLang): ``data: {"text": <cumulative>, "meta_info": {...}}\\n\\n`` per chunk,
``finish_reason`` null until the last chunk, then ``data: [DONE]\\n\\n``. OpenAI streams: a role
chunk, content chunks, a chunk with ``finish_reason``, with ``stream_options.include_usage`` a
chunk with ``choices: []`` and ``usage``, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from engines.sim.scheduler import SimRequest, spec_meta
from engines.sim.text import token_id

DONE = b"data: [DONE]\n\n"
BROKEN_EVENT_PREFIX = b'data: {"text":"'
"""--sim-malformed-rate: an event cut inside a JSON string, then the blank line."""


def compact(obj: Any) -> str:
    """JSON without spaces, as SGLang's orjson / pydantic output."""
    return json.dumps(obj, separators=(",", ":"))


def json_response(obj: Any, status: int = 200) -> web.Response:
    """A compact JSON response."""
    return web.json_response(obj, status=status, dumps=compact)


def _finish_json(req: SimRequest) -> str:
    return compact(req.finish_reason)


def openai_finish(req: SimRequest) -> tuple[str, Any]:
    """(finish_reason, matched_stop) as SGLang's OpenAI layer reports them."""
    fr = req.finish_reason
    if fr["type"] == "length":
        return "length", None
    return "stop", fr.get("matched")


class TextCursor:
    """Cumulative text of a request as tokens arrive (clipped at a stop string)."""

    __slots__ = ("req", "sent", "text")

    def __init__(self, req: SimRequest) -> None:
        self.req = req
        self.sent = 0
        self.text = ""

    def advance(self, n: int) -> str:
        """Append tokens up to ``n``; returns the new text (the delta)."""
        req = self.req
        before = len(self.text)
        if n > self.sent:
            self.text += "".join(req.words[self.sent:n])
            self.sent = n
            if req.text_chars is not None and len(self.text) > req.text_chars:
                self.text = self.text[: req.text_chars]
        return self.text[before:]


_WORD_PARTS: dict[str, tuple[bytes, bytes]] = {}
"""Token string -> (its text bytes, its ``output_ids`` entry): the hot path encodes each
distinct token once (the simulated vocabulary is a few hundred strings)."""
_WORD_PARTS_MAX = 1 << 16


def word_parts(word: str) -> tuple[bytes, bytes]:
    """(text bytes, id digits) of one token string, cached."""
    parts = _WORD_PARTS.get(word)
    if parts is None:
        parts = (word.encode(), str(token_id(word)).encode())
        if len(_WORD_PARTS) < _WORD_PARTS_MAX:
            _WORD_PARTS[word] = parts
    return parts


class NativeStream:
    """Chunks of POST /generate with ``stream: true``: cumulative ``text`` and ``output_ids``,
    then meta_info in SGLang 0.5.23's order (python/sglang/srt/managers/tokenizer_manager.py
    ``_handle_batch_output``: id, finish_reason, prompt_tokens, weight_version,
    num_retractions, reasoning_tokens, completion_tokens, cached_tokens; ``e2e_latency`` and the
    spec fields only once finished).

    Every chunk repeats everything sent so far (as SGLang does), so the text and the ids are
    kept as already-encoded byte buffers that only grow, and each chunk is one join of them
    with pre-encoded fixed parts: no per-chunk JSON encoding of the cumulative fields."""

    def __init__(self, req: SimRequest, rid: str, draft_tokens: int | None) -> None:
        self.req = req
        self.cur = TextCursor(req) if req.text_chars is not None else None
        self.draft_tokens = draft_tokens
        self.ids = bytearray()
        self.text = bytearray()
        self.n_ids = 0
        self.meta_head = f'"meta_info":{{"id":{compact(rid)},"finish_reason":'.encode()
        self.prompt_part = (f',"prompt_tokens":{req.prompt_tokens},"weight_version":"default",'
                            '"num_retractions":').encode()

    def _advance(self, n: int) -> None:
        req = self.req
        words = req.words[self.n_ids:n]
        text, ids = self.text, self.ids
        for w in words:
            t, i = word_parts(w)
            if ids:
                ids += b","
            ids += i
            if self.cur is None:
                text += t
        if self.cur is not None:
            delta = self.cur.advance(n)
            if delta:
                text += delta.encode()
        self.n_ids = n

    def chunk(self, n: int, final: bool, now: float) -> bytes:
        req = self.req
        if n > self.n_ids:
            self._advance(n)
        parts: list[bytes | bytearray] = [
            b'data: {"text":"', self.text, b'","output_ids":[', self.ids, b"],",
            self.meta_head, _finish_json(req).encode() if final else b"null",
            self.prompt_part, b"%d" % req.num_retractions,
            b',"reasoning_tokens":0,"completion_tokens":%d,"cached_tokens":%d'
            % (req.n, req.cached_tokens)]
        if final:
            tail = f',"e2e_latency":{now - req.arrival:.6f}'
            if self.draft_tokens is not None:
                for k, v in spec_meta(req, self.draft_tokens).items():
                    tail += f',"{k}":{v}'
            parts.append(tail.encode())
        parts.append(b"}}\n\n")
        return b"".join(parts)


def native_response(req: SimRequest, rid: str, draft_tokens: int | None,
                    now: float) -> dict[str, Any]:
    """Non-streaming /generate body (same meta_info order as the stream's last chunk)."""
    cur = TextCursor(req)
    cur.advance(req.n)
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": req.finish_reason,
        "prompt_tokens": req.prompt_tokens,
        "weight_version": "default",
        "num_retractions": req.num_retractions,
        "reasoning_tokens": 0,
        "completion_tokens": req.n,
        "cached_tokens": req.cached_tokens,
        "e2e_latency": now - req.arrival,
    }
    if draft_tokens is not None:
        meta.update(spec_meta(req, draft_tokens))
    return {"text": cur.text, "output_ids": [token_id(w) for w in req.words[: req.n]],
            "meta_info": meta}


class OpenAIStream:
    """Chunks of /v1/chat/completions (``chat=True``) or /v1/completions with stream=true, byte
    for byte as SGLang 0.5.23 writes them:

    - chat: python/sglang/srt/entrypoints/openai/sse_utils.py ``build_sse_content`` (msgspec,
      omit_defaults): a role chunk, content chunks whose delta is
      ``{"reasoning_content":null,"content":...}``, a separate finish chunk, no ``usage`` key;
    - completions: serving_completions.py (pydantic ``model_dump_json``): one chunk per output
      with ``"usage":null``, the last one carrying both the final text and the finish_reason
      (no extra empty chunk);
    - usage chunk (``stream_options.include_usage``): chat ``model_dump_json()`` of
      ChatCompletionStreamResponse, completions ``model_dump_json(exclude_none=True)``.
    """

    def __init__(self, req: SimRequest, model: str, chat: bool, include_usage: bool) -> None:
        self.req = req
        self.cur = TextCursor(req)
        self.chat = chat
        self.include_usage = include_usage
        self.id = ("chatcmpl-" if chat else "cmpl-") + req.rid
        self.created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.head = (f'data: {{"id":"{self.id}","object":"{obj}","created":{self.created},'
                     f'"model":{compact(model)},"choices":[').encode()
        if chat:
            self.content_open = b'{"index":0,"delta":{"reasoning_content":null,"content":"'
            self.content_close = (b'"},"logprobs":null,"finish_reason":null,'
                                  b'"matched_stop":null}]}\n\n')
        else:
            self.content_open = b'{"index":0,"text":"'
            self.content_close = (b'","logprobs":null,"finish_reason":null,'
                                  b'"matched_stop":null}],"usage":null}\n\n')

    def first(self) -> bytes | None:
        if not self.chat:
            return None
        return self.head + (b'{"index":0,"delta":{"reasoning_content":null,"role":"assistant",'
                            b'"content":""},"logprobs":null,"finish_reason":null,'
                            b'"matched_stop":null}]}\n\n')

    def chunk(self, n: int, final: bool, now: float) -> bytes:
        delta = self.cur.advance(n)
        if not final:
            if not delta:
                return b""
            return b"".join((self.head, self.content_open, delta.encode(), self.content_close))
        reason, matched = openai_finish(self.req)
        finish = (f'"logprobs":null,"finish_reason":"{reason}",'
                  f'"matched_stop":{compact(matched)}}}]').encode()
        if self.chat:
            out = b""
            if delta:
                out = b"".join((self.head, self.content_open, delta.encode(),
                                self.content_close))
            out += self.head + b'{"index":0,"delta":{"reasoning_content":null},' + finish + \
                b"}\n\n"
            if self.include_usage:
                u = self.req
                out += self.head + (
                    f'],"usage":{{"prompt_tokens":{u.prompt_tokens},'
                    f'"total_tokens":{u.prompt_tokens + u.n},"completion_tokens":{u.n},'
                    '"prompt_tokens_details":null,"reasoning_tokens":0,'
                    '"completion_tokens_details":null}}\n\n').encode()
            return out
        out = b"".join((self.head, b'{"index":0,"text":"', delta.encode(), b'",', finish,
                        b',"usage":null}\n\n'))
        if self.include_usage:
            u = self.req
            out += self.head + (
                f'],"usage":{{"prompt_tokens":{u.prompt_tokens},'
                f'"total_tokens":{u.prompt_tokens + u.n},"completion_tokens":{u.n},'
                '"reasoning_tokens":0}}\n\n').encode()
        return out


def usage(req: SimRequest) -> dict[str, int]:
    return {"prompt_tokens": req.prompt_tokens, "completion_tokens": req.n,
            "total_tokens": req.prompt_tokens + req.n}


def openai_response(req: SimRequest, model: str, chat: bool) -> dict[str, Any]:
    """Non-streaming OpenAI body."""
    cur = TextCursor(req)
    cur.advance(req.n)
    reason, matched = openai_finish(req)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": reason,
                              "matched_stop": matched}
    if chat:
        choice["message"] = {"role": "assistant", "content": cur.text,
                             "reasoning_content": None, "tool_calls": None}
    else:
        choice["text"] = cur.text
    return {
        "id": ("chatcmpl-" if chat else "cmpl-") + req.rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(req),
    }


def broken_event(req: SimRequest) -> bytes:
    """A syntactically broken SSE event: a JSON string never closed, then the blank line."""
    word = req.words[0].strip() if req.words else "abc"
    return BROKEN_EVENT_PREFIX + word.encode() + b"\n\n"
