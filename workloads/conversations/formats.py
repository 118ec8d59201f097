"""Record shapes of the conversation formats (:data:`FORMATS`, each described in docs/agentic.md,
"Formats") and their conversion to :class:`Conversation`: a converter takes one parsed record
and returns a Conversation or raises :class:`MalformedRecord`; file handling lives in
:mod:`workloads.conversations.loaders`."""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from workloads.conversations.model import CHARS_PER_TOKEN, Conversation, Message, Turn

FORMATS: tuple[str, ...] = ("sglang_agentic", "mooncake", "sharegpt", "openai", "speed_bench")

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block in Mooncake's traces: the FAST'25 trace README's sample
(kvcache-ai/Mooncake, FAST25-release/README.md) has 6955 input tokens over 14 blocks, i.e. 13
full 512-token blocks and a partial last one."""

_SHAREGPT_ROLES = {
    "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
    "chatgpt": "assistant", "bard": "assistant", "model": "assistant", "system": "system",
    "tool": "tool", "observation": "tool", "function_response": "tool",
    "function_call": "assistant",
}


class MalformedRecord(ValueError):
    """A record that has the format's shape wrongly (its reason is reported, the record
    counted and skipped)."""


def classify(record: Any) -> str | None:
    """Which format one parsed record belongs to, or None."""
    if not isinstance(record, Mapping):
        return None
    turns = record.get("turns")
    if isinstance(turns, list) and (not turns or isinstance(turns[0], str)):
        return "speed_bench"
    if "hash_ids" in record or ("input_length" in record and "timestamp" in record):
        return "mooncake"
    convs = record.get("conversations")
    if isinstance(convs, list) and convs:
        if isinstance(convs[0], list):
            return "sglang_agentic"
        if isinstance(convs[0], Mapping) and "from" in convs[0]:
            return "sharegpt"
    msgs = record.get("messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], Mapping) and "role" in msgs[0]:
        return "openai"
    return None


def _need(cond: bool, reason: str) -> None:
    if not cond:
        raise MalformedRecord(reason)


def _message(m: Any, where: str) -> dict[str, Any]:
    _need(isinstance(m, Mapping), f"{where}: message is not an object")
    role = m.get("role")
    _need(isinstance(role, str) and bool(role), f"{where}: message without a role")
    content = m.get("content")
    _need(content is None or isinstance(content, str | list),
          f"{where}: content is neither a string nor a list of parts")
    _need(content is not None or bool(m.get("tool_calls")),
          f"{where}: message without content or tool_calls")
    return dict(m)


def split_turns(messages: Sequence[Message]) -> tuple[str | None, tuple[Turn, ...]]:
    """(system prompt, turns) of a flat chat transcript: leading system messages form the
    system prompt; each run of non-assistant messages is a turn's delta and the assistant
    message after it is that turn's recorded reply; trailing messages form a last turn without
    a reply."""
    i = 0
    system_parts: list[str] = []
    while i < len(messages) and messages[i].get("role") == "system":
        c = messages[i].get("content")
        system_parts.append(c if isinstance(c, str) else str(c))
        i += 1
    turns: list[Turn] = []
    pending: list[Message] = []
    for m in messages[i:]:
        if m.get("role") == "assistant":
            _need(bool(pending), "an assistant message with no user/tool message before it")
            turns.append(Turn(messages=tuple(pending), reply=m))
            pending = []
        else:
            pending.append(m)
    if pending:
        turns.append(Turn(messages=tuple(pending)))
    _need(bool(turns), "no user or tool message")
    return ("\n\n".join(system_parts) if system_parts else None), tuple(turns)


def _tools(record: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    tools = record.get("tools")
    if tools is None:
        return ()
    _need(isinstance(tools, list) and all(isinstance(t, Mapping) for t in tools),
          "tools is not a list of objects")
    return tuple(tools)


def _domain(record: Mapping[str, Any], default: str) -> str:
    for key in ("domain", "category"):
        v = record.get(key)
        if isinstance(v, str) and v:
            return v
    return default


def from_openai(record: Mapping[str, Any], cid: str, source: str, domain: str) -> Conversation:
    """An ``openai`` record (docs/agentic.md, "Formats")."""
    msgs = record.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise MalformedRecord("messages is not a non-empty list")
    messages = [_message(m, f"messages[{j}]") for j, m in enumerate(msgs)]
    system, turns = split_turns(messages)
    return Conversation(str(record.get("id", cid)), turns, system, _tools(record),
                        _domain(record, domain), source)


def from_sharegpt(record: Mapping[str, Any], cid: str, source: str, domain: str) -> Conversation:
    """A ``sharegpt`` record (docs/agentic.md, "Formats")."""
    conv = record.get("conversations")
    if not isinstance(conv, list) or not conv:
        raise MalformedRecord("conversations is not a non-empty list")
    messages: list[dict[str, Any]] = []
    for j, m in enumerate(conv):
        _need(isinstance(m, Mapping) and isinstance(m.get("value"), str),
              f"conversations[{j}]: no string value")
        role = _SHAREGPT_ROLES.get(str(m.get("from", "")).lower())
        _need(role is not None, f"conversations[{j}]: unknown speaker {m.get('from')!r}")
        messages.append({"role": role, "content": m["value"]})
    system, turns = split_turns(messages)
    if isinstance(record.get("system"), str) and system is None:
        system = record["system"]
    return Conversation(str(record.get("id", cid)), turns, system, _tools(record),
                        _domain(record, domain), source)


def from_sglang_agentic(conv: Any, cid: str, source: str, domain: str) -> Conversation:
    """One conversation (a list of turns) of SGLang's agentic trace (docs/agentic.md,
    "Formats": empty turns skipped, the first turn's system message is the system prompt)."""
    _need(isinstance(conv, list), "conversation is not a list of turns")
    system: str | None = None
    turns: list[Turn] = []
    for j, t in enumerate(conv):
        _need(isinstance(t, Mapping), f"turn {j} is not an object")
        raw = t.get("messages")
        if not raw:
            continue
        _need(isinstance(raw, list), f"turn {j}: messages is not a list")
        msgs = [_message(m, f"turn {j} messages[{i}]") for i, m in enumerate(raw)]
        if not turns and system is None and msgs[0]["role"] == "system":
            c = msgs.pop(0).get("content")
            system = c if isinstance(c, str) else str(c)
        if not msgs:
            continue
        pt = t.get("prompt_tokens")
        _need(pt is None or (isinstance(pt, int | float) and pt >= 0),
              f"turn {j}: prompt_tokens is not a number")
        turns.append(Turn(messages=tuple(msgs), prompt_tokens=None if pt is None else int(pt)))
    _need(bool(turns), "no turn with messages")
    return Conversation(cid, tuple(turns), system, (), domain, source)


@lru_cache(maxsize=4096)
def mooncake_block_text(hash_id: int, tokens: int) -> str:
    """Deterministic text of one Mooncake block: equal hash ids give equal text, so requests
    sharing a hash-id prefix share a text prefix (and hit the server's prefix cache as the
    trace's did); ``tokens * CHARS_PER_TOKEN`` characters of words seeded by the id."""
    rng = random.Random(f"mooncake-block-{hash_id}")
    words: list[str] = [f"[{hash_id}]"]
    size = len(words[0])
    target = tokens * CHARS_PER_TOKEN
    while size < target:
        w = rng.choice(_BLOCK_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:target]


_BLOCK_WORDS = tuple(
    "the of cache block request token prefix model server batch decode prefill layer key value "
    "attention memory trace user query context reply store load page index hash session".split()
)


def from_mooncake(record: Mapping[str, Any], cid: str, source: str, domain: str,
                  block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Conversation:
    """One Mooncake request as a one-turn conversation arriving at ``timestamp`` ms, its prompt
    rebuilt from ``hash_ids`` (docs/agentic.md, "Formats"), the last block cut to reach
    ``input_length``."""
    n_in = record.get("input_length")
    ts = record.get("timestamp")
    if not isinstance(n_in, int) or n_in <= 0:
        raise MalformedRecord("input_length is not a positive integer")
    if not isinstance(ts, int | float) or ts < 0:
        raise MalformedRecord("timestamp is not a number >= 0")
    n_out = record.get("output_length")
    _need(n_out is None or (isinstance(n_out, int) and n_out > 0),
          "output_length is not a positive integer")
    hashes = record.get("hash_ids") or []
    _need(isinstance(hashes, list) and all(isinstance(h, int) for h in hashes),
          "hash_ids is not a list of integers")
    target = n_in * CHARS_PER_TOKEN
    parts: list[str] = []
    size = 0
    for h in hashes:
        if size >= target:
            break
        block = mooncake_block_text(h, block_tokens)
        parts.append(block[: target - size])
        size += len(parts[-1])
    if size < target:  # the trace's tokens beyond its last block: unique to this request
        parts.append(mooncake_block_text(-1 - zlib.crc32(cid.encode()), n_in)[: target - size])
    turn = Turn(messages=({"role": "user", "content": "".join(parts)},),
                output_tokens=n_out, arrival_s=float(ts) / 1000.0, prompt_tokens=n_in)
    return Conversation(cid, (turn,), None, (), domain, source,
                        meta={"hash_ids": len(hashes)})


def from_speed_bench(record: Mapping[str, Any], cid: str, source: str,
                     domain: str) -> Conversation:
    """One SPEED-Bench row: a user message per round, ``category`` the domain (docs/agentic.md,
    "Formats")."""
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t
                                                           for t in turns):
        raise MalformedRecord("turns is not a non-empty list of strings")
    qid = record.get("question_id", record.get("id", cid))
    return Conversation(str(qid), tuple(Turn(messages=({"role": "user", "content": t},))
                                        for t in turns),
                        None, (), _domain(record, domain), source)


def convert(fmt: str, record: Any, cid: str, source: str, domain: str,
            block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Conversation:
    """Convert one record of format ``fmt`` (raises :class:`MalformedRecord`)."""
    if fmt == "sglang_agentic":
        return from_sglang_agentic(record, cid, source, domain)
    _need(isinstance(record, Mapping), "record is not a JSON object")
    if fmt == "mooncake":
        return from_mooncake(record, cid, source, domain, block_tokens)
    if fmt == "sharegpt":
        return from_sharegpt(record, cid, source, domain)
    if fmt == "openai":
        return from_openai(record, cid, source, domain)
    if fmt == "speed_bench":
        return from_speed_bench(record, cid, source, domain)
    raise ValueError(f"unknown conversation format {fmt!r} (known: {', '.join(FORMATS)})")
