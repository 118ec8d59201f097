"""The fixed-schedule server's stream: the bytes of one response, SGLang-native ``/generate``
or OpenAI chat, as bench/fixed_schedule_server.py writes them and the parse-cost benches feed
them to specgrid's client connection (bench/ is not a package: scripts import this module from
their own folder)."""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any

TOKEN = "tok "
"""4 bytes of text per token: a stream's cumulative text grows like a real stream's."""
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: keep-alive\r\n\r\n")


def chunk_plan(prompt: str, n_tokens: int, max_per_chunk: int) -> list[int]:
    """Tokens per chunk for one request: 1..max_per_chunk, seeded by the prompt text (a small
    LCG: seeding ``random.Random`` per request would cost the server ~15 us)."""
    x = zlib.crc32(prompt.encode())
    plan: list[int] = []
    left = n_tokens
    while left > 0:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        k = min(left, 1 + (x >> 16) % max_per_chunk)
        plan.append(k)
        left -= k
    return plan


def frames(plan: list[int], n_prompt: int, chat: bool, continuous: bool, spec: bool,
           fault: str | None) -> list[bytes | None]:
    """The HTTP chunks of one response, chunk j carrying ``plan[j]`` tokens (None = drop the
    connection there); faults ``broken`` (malformed event), ``close``, ``abort``."""
    out: list[bytes | None] = []
    done = 0
    for j, k in enumerate(plan):
        done += k
        final = j == len(plan) - 1
        if chat:
            out.append(_chat_frame(k, done, n_prompt, final, continuous))
        else:
            out.append(_native_frame(done, n_prompt, final, len(plan), spec, fault == "abort"))
    if fault == "broken" and len(out) > 1:
        out[1] = _http_chunk(b'data: {"text": "tok tok", "meta_info": {"completion_tokens": \n\n',
                             False)
    if fault == "close" and len(out) > 2:
        out[2] = None
    return out


@functools.lru_cache(maxsize=1 << 16)
def _native_frame(done: int, prompt_tokens: int, final: bool, n_chunks: int, spec: bool,
                  abort: bool) -> bytes:
    """SGLang-native event: cumulative text and completion_tokens; the finish reason and the
    speculation counters (one verify step per chunk) on the final one."""
    meta: dict[str, Any] = {"id": "0", "finish_reason": None, "prompt_tokens": prompt_tokens,
                            "completion_tokens": done, "cached_tokens": 0}
    if final:
        meta["finish_reason"] = ({"type": "abort", "message": "injected abort"} if abort
                                 else {"type": "length", "length": done})
        if spec:
            meta["spec_verify_ct"] = n_chunks
            meta["spec_accept_length"] = done / n_chunks
    payload = _sse({"text": TOKEN * done, "meta_info": meta})
    return _http_chunk(payload + b"data: [DONE]\n\n" if final else payload, final)


@functools.lru_cache(maxsize=1 << 16)
def _chat_frame(k: int, done: int, prompt_tokens: int, final: bool, continuous: bool) -> bytes:
    """OpenAI chat chunk (usage on every chunk with continuous_usage_stats), then a usage chunk
    after the final one."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": done,
             "total_tokens": prompt_tokens + done}
    chunk: dict[str, Any] = {"id": "0", "object": "chat.completion.chunk", "model": "fixed",
                             "choices": [{"index": 0, "delta": {"content": TOKEN * k},
                                          "finish_reason": "length" if final else None}]}
    if continuous:
        chunk["usage"] = usage
    payload = _sse(chunk)
    if final:
        payload += _sse({**chunk, "choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    return _http_chunk(payload, final)


def _http_chunk(payload: bytes, final: bool) -> bytes:
    """One HTTP/1.1 chunk (plus the terminating zero chunk on the final one)."""
    return b"%x\r\n%b\r\n" % (len(payload), payload) + (b"0\r\n\r\n" if final else b"")


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"




class NullTransport:
    """What a client connection asks of its transport when bytes are fed to it directly."""

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass
