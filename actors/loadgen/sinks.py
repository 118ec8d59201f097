"""The parsers of a streamed response body, one per endpoint: ``feed(bytes, t)`` per read (``t``:
the read's stamp), then ``finish()``; each fills a :class:`~actors.loadgen.timeline.Timeline`
and raises :class:`~actors.loadgen.timeline.StreamError` on an error or malformed event.

* SGLang native ``POST /generate`` (:class:`NativeSink`, ``stream: true``): every event carries
  cumulative ``text`` and ``meta_info.completion_tokens``; intermediate events are scanned for
  the count in place, never ``json.loads``-ed (docs/loadgen.md, "Client CPU per chunk"); the
  final event is parsed fully (tokens, ``finish_reason``, ``spec_verify_ct`` and the acceptance
  histogram ``spec_correct_drafts_histogram``: docs/loadgen.md, "Accept length").
* OpenAI ``POST /v1/chat/completions`` (:class:`ChatSink`): small events, ``json.loads``-ed.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:
    from actors.loadgen._native_scan import scan as _scan
except ModuleNotFoundError as exc:  # this source tree was never built (pip install -e .)
    raise ModuleNotFoundError(
        f"specgrid's C module actors/loadgen/_native_scan is not built next to {__file__}: "
        "in a checkout run `pip install -e .` (a plain `pip install .` builds it into "
        "site-packages, which a run started inside the checkout does not import)",
        name=exc.name) from None
from actors.loadgen.sse import SSEDecoder, split_events
from actors.loadgen.timeline import StreamError, Timeline

_CT_KEY = b'"completion_tokens":'
_CT_LEN = len(_CT_KEY)
_INT = re.compile(rb"\s*(\d+)").match
_DONE = b"[DONE]"
_OBJ_OPEN = ord("{")
_OBJ_CLOSE = ord("}")


def _finish_str(fr: Any) -> str | None:
    if fr is None:
        return None
    if isinstance(fr, dict):
        return str(fr.get("type")) if fr.get("type") is not None else json.dumps(fr)
    return str(fr)


def _spec_verify(meta: dict[str, Any], completion: int | None) -> int | None:
    v = meta.get("spec_verify_ct")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return int(v)
    acc = meta.get("spec_accept_length")  # servers without spec_verify_ct
    if isinstance(acc, int | float) and acc > 0 and completion:
        return max(1, round(completion / acc))
    return None


def _histogram(value: Any) -> list[int] | None:
    """A server's acceptance histogram as sent (a non-empty list of counts >= 0), else None."""
    if isinstance(value, list) and value and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return list(value)
    return None


def _spec_details(tl: Timeline, verify_ct: Any, histogram: Any) -> None:
    """A request's verify count and acceptance histogram into ``tl``; the histogram's sum is
    the verify count where the server gives none (SGLang with zero draft tokens)."""
    tl.accept_histogram = _histogram(histogram)
    if isinstance(verify_ct, int) and not isinstance(verify_ct, bool) and verify_ct > 0:
        tl.spec_verify_ct = verify_ct
    elif tl.spec_verify_ct is None and tl.accept_histogram is not None:
        tl.spec_verify_ct = sum(tl.accept_histogram)


def _error_text(obj: Any) -> str | None:
    if isinstance(obj, dict) and "error" in obj:
        err = obj["error"]
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    return None


class NativeSink:
    """Parser of an SGLang native ``/generate`` stream: ``feed(bytes, t)`` per read, then
    ``finish()``. Raises on a malformed or error event.

    Hot path (every event of a healthy stream): one call per read to the C scan
    (actors/loadgen/_native_scan.c: its rule, and why C), which walks the read's events in
    place and appends each event's new-token count; this method then appends the read's one
    stamp once for all of them and keeps the last counted event as (read, bounds), sliced only
    when ``finish`` asks. Anything the scan does not cover (CR line ends, comments, events of
    several lines, ``[DONE]``, error events, events without the key or with an unusual value)
    goes through ``sse.split_events`` and ``_event``, the general path, from that event on."""

    __slots__ = ("tl", "buf", "prev", "done", "t_last", "_last_src", "_last_a", "_last_b")

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.buf = b""
        """Bytes of an incomplete event carried to the next read."""
        self.prev = 0
        self.done = False
        self.t_last: float | None = None
        # the last counted event: its bytes are sliced out of its read (``last``) only when
        # asked for, at the end of the stream, not once per read
        self._last_src: bytes | None = None
        self._last_a = 0
        self._last_b = 0

    @property
    def last(self) -> bytes | None:
        """The data of the last event that carried ``completion_tokens`` (None before one)."""
        src = self._last_src
        return None if src is None else src[self._last_a:self._last_b]

    def _set_last(self, p: bytes) -> None:
        self._last_src, self._last_a, self._last_b = p, 0, len(p)

    def feed(self, data: bytes, t: float) -> None:
        self.t_last = t
        buf = self.buf + data if self.buf else data
        tokens = self.tl.chunk_tokens
        first = len(tokens)  # the events of this read are tokens[first:]
        end, prev, last_at, last_end, general = _scan(buf, self.prev, tokens)
        if prev != self.prev:  # one stamp per read, appended for all its new events at once
            self.prev = prev
            times = self.tl.chunk_times
            new = len(tokens) - first
            if times and times[-1] == t:  # the previous feed had the same stamp
                self.tl.merged += new
            elif new > 1:
                self.tl.merged += new - 1
            if new == 1:
                times.append(t)
            else:
                times += [t] * new
        if last_at >= 0:
            self._last_src, self._last_a, self._last_b = buf, last_at + 6, last_end
        if not general:
            self.buf = buf[end:] if end else buf
            return
        events, self.buf = split_events(buf[end:] if end else buf)
        for p in events:
            self._event(p, t)

    def _event(self, p: bytes, t: float) -> None:
        """One event's data, the general path (the same rules as the hot path, and more)."""
        if p and p[0] == _OBJ_OPEN and p[-1] == _OBJ_CLOSE:
            i = p.rfind(_CT_KEY)
            if i >= 0:
                m = _INT(p, i + _CT_LEN)
                if m is not None:
                    n = int(m.group(1))
                    if n > self.prev:
                        self.tl.add_chunk(t, n - self.prev)
                        self.prev = n
                    self._set_last(p)
                    return
        if p == _DONE:
            self.done = True
            return
        obj = json.loads(p)  # error / unusual event: parse fully (raises if malformed)
        err = _error_text(obj)
        if err is not None:
            raise StreamError(f"error event: {err}")
        meta = obj.get("meta_info") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or "completion_tokens" not in meta:
            raise StreamError(f"unexpected event: {p[:200]!r}")
        n = int(meta["completion_tokens"])
        if n > self.prev:
            self.tl.add_chunk(t, n - self.prev)
            self.prev = n
        self._set_last(p)

    def finish(self) -> None:
        tl = self.tl
        if self.buf.strip():
            raise StreamError(f"stream ended inside an event: {self.buf[:200]!r}")
        last = self.last
        if last is None:
            raise StreamError("stream ended without any event")
        obj = json.loads(last)
        meta = obj.get("meta_info") or {}
        # the final event repeats the whole text (SGLang's cumulative stream): no extra work
        text = obj.get("text")
        tl.output_text = text if isinstance(text, str) else None
        fr = meta.get("finish_reason")
        tl.input_tokens = meta.get("prompt_tokens")
        tl.output_tokens = meta.get("completion_tokens", self.prev)
        tl.finish_reason = _finish_str(fr)
        tl.spec_verify_ct = _spec_verify(meta, tl.output_tokens)
        _spec_details(tl, None, meta.get("spec_correct_drafts_histogram"))
        # SGLang 0.5.23 with --enable-metrics (srt/managers/tokenizer_manager.py): seconds from
        # receiving the request to its first token, and in the scheduler's queue
        tl.server_ttft_s = _seconds(meta.get("first_token_latency"))
        tl.server_queue_s = _seconds(meta.get("queue_time"))
        if isinstance(fr, dict) and fr.get("type") == "abort":
            raise StreamError(f"aborted: {fr.get('message', '')}")
        if fr is None and not self.done:
            raise StreamError("stream ended before finish_reason or [DONE]")


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def _carries_token(delta: dict[str, Any]) -> bool:
    """Without per-chunk usage: does this delta stand for a generated token (ChatSink's rule)?
    A ``content`` string, ``""`` included, non-null reasoning or tool calls, but not the
    role-only opening chunk (``role`` with empty or no content and nothing else)."""
    content = delta.get("content")
    other = (delta.get("reasoning_content") is not None or delta.get("reasoning") is not None
             or bool(delta.get("tool_calls")))
    if "role" in delta and not content and not other:
        return False
    return isinstance(content, str) or other


class ChatSink:
    """Parser of an OpenAI ``/v1/chat/completions`` stream (same interface as NativeSink).

    The rule: the first chunk that carries a generated token is the first token, whatever its
    text; a chunk carries Δ``usage.completion_tokens`` tokens with per-chunk usage, else one
    per delta that :func:`_carries_token`; the final usage-only chunk (``choices: []``) sets
    the totals and vLLM's (``metrics.speculative_decoding``, ``num_spec_steps`` = verify
    steps) or SGLang's (``sglext.spec_tokens_details``) speculative counts. The output text is
    the reasoning text a server split off, then the deltas' ``content``. Why, with the engines'
    own clients' rules beside it: docs/loadgen.md ("Which chunks of an OpenAI chat stream carry
    tokens").
    """

    __slots__ = ("tl", "decoder", "counted", "usage_ct", "fr", "done", "t_last", "continuous",
                 "parts", "reasoning_parts")

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.decoder = SSEDecoder()
        self.counted = 0  # tokens attributed to chunks so far (Σ chunk_tokens)
        self.usage_ct: int | None = None
        self.fr: Any = None
        self.done = False
        self.t_last: float | None = None
        self.continuous = False
        """A chunk with ``choices`` carried ``usage.completion_tokens`` (per-chunk usage)."""
        self.parts: list[str] = []
        """The deltas' ``content`` text, joined once at ``finish`` (the event is already
        decoded, so keeping it costs an append)."""
        self.reasoning_parts: list[str] = []
        """Reasoning text a server splits off (``reasoning_content``: SGLang, ``reasoning``:
        vLLM), generated tokens too."""

    def feed(self, data: bytes, t: float) -> None:
        self.t_last = t
        for p in self.decoder.feed(data):
            if p == _DONE:
                self.done = True
                continue
            self.event(json.loads(p), t)

    def event(self, obj: dict[str, Any], t: float) -> None:
        """One parsed event that arrived at ``t`` (a subclass that keeps more of the reply
        extends this, so each event is decoded once). The counting rule: the class doc."""
        tl = self.tl
        err = _error_text(obj)
        if err is not None:
            raise StreamError(f"error event: {err}")
        usage = obj.get("usage")
        ct = None
        if usage:
            if usage.get("prompt_tokens") is not None:
                tl.input_tokens = usage["prompt_tokens"]
            ct = usage.get("completion_tokens")
            if ct is not None:
                self.usage_ct = ct
        choices = obj.get("choices")
        if not choices:  # the usage-only chunk, SGLang's sglext chunk: totals, no arrival
            spec = (obj.get("metrics") or {}).get("speculative_decoding")
            if spec:
                _spec_details(tl, spec.get("num_spec_steps"), spec.get("acceptance_histogram"))
            details = (obj.get("sglext") or {}).get("spec_tokens_details")
            if isinstance(details, dict):
                _spec_details(tl, details.get("spec_verify_ct"),
                              details.get("spec_correct_drafts_histogram"))
            return
        ch = choices[0]
        if ch.get("finish_reason") is not None:
            self.fr = ch["finish_reason"]
        delta = ch.get("delta")
        if delta:
            piece = delta.get("content")
            if piece and isinstance(piece, str):
                self.parts.append(piece)
            piece = delta.get("reasoning_content") or delta.get("reasoning")
            if piece and isinstance(piece, str):
                self.reasoning_parts.append(piece)
        if ct is not None:
            self.continuous = True
            k = ct - self.counted
        elif self.continuous:
            return
        else:
            k = 1 if _carries_token(ch.get("delta") or {}) else 0
        if k > 0:
            tl.add_chunk(t, k)
            self.counted += k

    def finish(self) -> None:
        tl = self.tl
        if self.decoder.pending.strip():
            raise StreamError(f"stream ended inside an event: {self.decoder.pending[:200]!r}")
        tl.output_tokens = self.usage_ct if self.usage_ct is not None else self.counted
        # reasoning first: a server that splits it off streams it before the answer
        tl.output_text = "".join(self.reasoning_parts) + "".join(self.parts)
        tl.finish_reason = _finish_str(self.fr)
        if self.fr == "abort":
            raise StreamError("aborted")
        if self.fr is None and not self.done:
            raise StreamError("stream ended before finish_reason or [DONE]")
