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

from engines.sim.scheduler import SimRequest
from engines.sim.spec_fields import details_json, spec_details, spec_meta
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


EPOCH_OFFSET = time.time() - time.monotonic()
"""Added to a time.monotonic() reading gives epoch seconds (SGLang's convert_time_to_realtime
of a perf_counter reading)."""


def epoch(t: float) -> float:
    return t + EPOCH_OFFSET


def _f(x: float) -> str:
    return repr(float(x))


def scheduler_times(req: SimRequest) -> str:
    """SGLang 0.5.23 scheduler time stats of meta_info (observability/req_time_stats.py
    ``SchedulerReqTimeStats.convert_to_output_meta_info``, with --enable-metrics): epoch
    seconds for ``*_time``, seconds for ``queue_time``; the simulator's request enters the
    scheduler when it arrives and leaves the queue when its first prefill step starts."""
    sched = req.scheduled_at if req.scheduled_at is not None else req.arrival
    prefill_done = req.first_token_at if req.first_token_at is not None else sched
    return (f',"storage_prefetch_wait":0.0,"storage_staging_wait":0.0,'
            f'"forward_entry_time":{_f(epoch(req.arrival))},'
            f'"prefill_finished_time":{_f(epoch(prefill_done))},'
            f'"queue_time":{_f(sched - req.arrival)}')


def cache_details(req: SimRequest) -> str:
    """``cached_tokens_details``: null without a prefix hit, else the per-tier split."""
    if not req.cached_tokens:
        return ',"cached_tokens_details":null,"dp_rank":null'
    return (f',"cached_tokens_details":{{"device":{req.cached_tokens},"host":0}},'
            '"dp_rank":null')


def final_times(req: SimRequest, now: float, draft_tokens: int | None, timings: bool,
                sent_at: float | None) -> str:
    """The finished request's tail: ``e2e_latency``, the spec fields, then (with metrics)
    the tokenizer-side time stats (req_time_stats.py ``APIServerReqTimeStats.
    convert_to_output_meta_info``): epoch ``*_ts``, ``first_token_latency`` seconds,
    ``decode_throughput`` = (completion_tokens - 1) / (finished - first token) tokens/s."""
    finished = req.finished_at if req.finished_at is not None else now
    tail = f',"e2e_latency":{_f(finished - req.arrival)}'
    if draft_tokens is not None:
        for k, v in spec_meta(req, draft_tokens).items():
            tail += f',"{k}":{compact(v) if isinstance(v, list) else v}'
    if not timings:
        return tail
    tail += f',"request_received_ts":{_f(epoch(req.arrival))}'
    first = req.first_token_at
    if first is not None and first > req.arrival:
        tail += f',"first_token_latency":{_f(first - req.arrival)}'
    tail += f',"api_server_dispatch_finish_ts":{_f(epoch(req.arrival))}'
    if sent_at is not None:
        tail += f',"response_sent_to_client_ts":{_f(epoch(sent_at))}'
    tail += f',"request_finished_ts":{_f(epoch(finished))}'
    if first is not None and req.n > 1 and finished > first:
        tail += f',"decode_throughput":{_f((req.n - 1) / (finished - first))}'
    return tail


def weight_versions(req: SimRequest) -> str:
    return f',"weight_versions":[{{"version":"default","start":0,"end":{req.n}}}]'


class NativeStream:
    """Chunks of POST /generate with ``stream: true``: cumulative ``text`` and ``output_ids``,
    then meta_info in SGLang 0.5.23's order (docs/simulator.md "Wire format"), with
    response_sent_to_client_ts on the first chunk; the time stats only with --enable-metrics.

    Every chunk repeats everything sent so far (as SGLang does), so the text and the ids are
    kept as already-encoded byte buffers that only grow, and each chunk is one join of them
    with pre-encoded fixed parts: no per-chunk JSON encoding of the cumulative fields."""

    def __init__(self, req: SimRequest, rid: str, draft_tokens: int | None,
                 timings: bool = False) -> None:
        self.req = req
        self.cur = TextCursor(req) if req.text_chars is not None else None
        self.draft_tokens = draft_tokens
        self.timings = timings
        self.ids = bytearray()
        self.text = bytearray()
        self.n_ids = 0
        self.sent_at: float | None = None
        self.sched = b""
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
        first = self.sent_at is None
        if first and self.timings:
            self.sched = scheduler_times(req).encode()
        parts: list[bytes | bytearray] = [
            b'data: {"text":"', self.text, b'","output_ids":[', self.ids, b"],",
            self.meta_head, _finish_json(req).encode() if final else b"null",
            self.prompt_part, b"%d" % req.num_retractions, self.sched,
            b',"reasoning_tokens":0,"completion_tokens":%d,"cached_tokens":%d'
            % (req.n, req.cached_tokens)]
        tail = weight_versions(req) if final else ""
        tail += cache_details(req)
        if first and not final:
            self.sent_at = now
            tail += f',"response_sent_to_client_ts":{_f(epoch(now))}'
        if final:
            tail += final_times(req, now, self.draft_tokens, self.timings, self.sent_at)
            if self.sent_at is None:
                self.sent_at = now
                tail += f',"response_sent_to_client_ts":{_f(epoch(now))}'
        parts.append(tail.encode())
        parts.append(b"}}\n\n")
        return b"".join(parts)


def native_response(req: SimRequest, rid: str, draft_tokens: int | None,
                    now: float, timings: bool = False) -> dict[str, Any]:
    """Non-streaming /generate body (the stream's last chunk's meta_info, then
    ``response_sent_to_client_ts``)."""
    cur = TextCursor(req)
    cur.advance(req.n)
    meta = (f'{{"id":{compact(rid)},"finish_reason":{_finish_json(req)},'
            f'"prompt_tokens":{req.prompt_tokens},"weight_version":"default",'
            f'"num_retractions":{req.num_retractions}'
            + (scheduler_times(req) if timings else "")
            + f',"reasoning_tokens":0,"completion_tokens":{req.n},'
            f'"cached_tokens":{req.cached_tokens}'
            + weight_versions(req) + cache_details(req)
            + final_times(req, now, draft_tokens, timings, None)
            + f',"response_sent_to_client_ts":{_f(epoch(now))}}}')
    return {"text": cur.text, "output_ids": [token_id(w) for w in req.words[: req.n]],
            "meta_info": json.loads(meta)}


def usage_json(req: SimRequest, n: int, full: bool = True) -> str:
    """``usage`` as SGLang 0.5.23's UsageInfo: ``full`` is ``model_dump()`` (all six keys),
    otherwise ``exclude_none`` (the completions usage-only chunk)."""
    head = (f'{{"prompt_tokens":{req.prompt_tokens},"total_tokens":{req.prompt_tokens + n},'
            f'"completion_tokens":{n},')
    if full:
        return head + ('"prompt_tokens_details":null,"reasoning_tokens":0,'
                       '"completion_tokens_details":null}')
    return head + '"reasoning_tokens":0}'


class OpenAIStream:
    """Chunks of /v1/chat/completions (``chat=True``) or /v1/completions with stream=true, byte
    for byte as SGLang 0.5.23 writes them (docs/simulator.md "Wire format": the chat and
    completions chunks, the usage chunk, and with ``return_spec_tokens_details`` --
    ``spec_tokens``: the server's draft tokens -- the ``sglext`` chunk right before it)."""

    def __init__(self, req: SimRequest, model: str, chat: bool, include_usage: bool,
                 continuous_usage: bool = False, spec_tokens: int | None = None) -> None:
        self.req = req
        self.spec_tokens = spec_tokens
        self.cur = TextCursor(req)
        self.chat = chat
        self.include_usage = include_usage
        self.continuous = continuous_usage
        self.id = req.rid
        self.created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.head = (f'data: {{"id":{compact(self.id)},"object":"{obj}",'
                     f'"created":{self.created},"model":{compact(model)},"choices":[').encode()
        if chat:
            self.content_open = b'{"index":0,"delta":{"reasoning_content":null,"content":"'
            self.content_close = b'"},"logprobs":null,"finish_reason":null,"matched_stop":null}]'
        else:
            self.content_open = b'{"index":0,"text":"'
            self.content_close = b'","logprobs":null,"finish_reason":null,"matched_stop":null}]'

    def _usage_tail(self, n: int) -> bytes:
        if self.continuous:
            return f',"usage":{usage_json(self.req, n)}}}\n\n'.encode()
        return b"}\n\n" if self.chat else b',"usage":null}\n\n'

    def _sglext(self) -> bytes:
        """The ``sglext`` chunk (``model_dump_json()``: ``"usage":null`` kept), or nothing."""
        if self.spec_tokens is None:
            return b""
        details = spec_details(spec_meta(self.req, self.spec_tokens))
        if details is None:
            return b""
        dj = details_json(details)
        return self.head + f'],"usage":null,"sglext":{{"spec_tokens_details":{dj}}}}}\n\n'.encode()

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
            return b"".join((self.head, self.content_open, delta.encode(), self.content_close,
                             self._usage_tail(n)))
        reason, matched = openai_finish(self.req)
        finish = (f'"logprobs":null,"finish_reason":"{reason}",'
                  f'"matched_stop":{compact(matched)}}}]').encode()
        u = self.req
        if self.chat:
            out = b""
            if delta:
                out = b"".join((self.head, self.content_open, delta.encode(),
                                self.content_close, self._usage_tail(n)))
            out += self.head + b'{"index":0,"delta":{"reasoning_content":null},' + finish + \
                b"}\n\n" + self._sglext()
            if self.include_usage:
                out += self.head + f'],"usage":{usage_json(u, u.n)}}}\n\n'.encode()
            return out
        out = b"".join((self.head, b'{"index":0,"text":"', delta.encode(), b'",', finish,
                        self._usage_tail(n), self._sglext()))
        if self.include_usage:
            out += self.head + f'],"usage":{usage_json(u, u.n, full=False)}}}\n\n'.encode()
        return out


def usage(req: SimRequest) -> dict[str, Any]:
    """Non-streaming ``usage`` (UsageInfo ``model_dump()``)."""
    return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.n,
            "completion_tokens": req.n, "prompt_tokens_details": None, "reasoning_tokens": 0,
            "completion_tokens_details": None}


def openai_response(req: SimRequest, model: str, chat: bool,
                    spec_tokens: int | None = None) -> dict[str, Any]:
    """Non-streaming OpenAI body (serving_chat.py / serving_completions.py: the id is the rid,
    ``metadata`` carries the weight versions; ``sglext`` last, with
    ``return_spec_tokens_details``: ``spec_tokens`` the server's draft tokens)."""
    cur = TextCursor(req)
    cur.advance(req.n)
    reason, matched = openai_finish(req)
    choice: dict[str, Any] = {"index": 0}
    if chat:
        choice["message"] = {"role": "assistant", "content": cur.text,
                             "reasoning_content": None}
    else:
        choice["text"] = cur.text
    choice.update(logprobs=None, finish_reason=reason, matched_stop=matched)
    out = {
        "id": req.rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(req),
        "metadata": {"weight_version": "default",
                     "weight_versions": [{"version": "default", "start": 0, "end": req.n}]},
    }
    details = None if spec_tokens is None else spec_details(spec_meta(req, spec_tokens))
    if details is not None:
        out["sglext"] = {"spec_tokens_details": details}
    return out


def broken_event(req: SimRequest) -> bytes:
    """A syntactically broken SSE event: a JSON string never closed, then the blank line."""
    word = req.words[0].strip() if req.words else "abc"
    return BROKEN_EVENT_PREFIX + word.encode() + b"\n\n"
