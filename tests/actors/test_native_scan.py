"""The C scan of SGLang native streams (actors/loadgen/_native_scan.c) against a Python model
of its rule, on well-formed, random and mutated reads; NativeSink on top of it is checked
against json.loads in tests/actors/test_sse.py."""

from __future__ import annotations

import json
import random
import re

import pytest

from actors.loadgen._native_scan import scan

KEY = b'"completion_tokens":'
VALUE = re.compile(rb"[ \t\n\r\f\v]*([0-9]{1,18})(?=[,} \t\n\r\f\v])")


def reference_scan(buf: bytes, prev: int) -> tuple[tuple[int, int, int, int, bool], list[int]]:
    """The rule, written for reading: well-formed lines ``data: {...}`` + blank line, no CR in
    the read, the last key's value 1-18 digits after optional whitespace and before ``,``,
    ``}`` or whitespace. Returns (scan's result, the counts it appends)."""
    tokens: list[int] = []
    start, last_at, last_end = 0, -1, -1
    general = b"\r" in buf
    while not general:
        i = buf.find(b"\n", start)
        if i < 0 or i == len(buf) - 1:
            break
        line = buf[start:i]
        if buf[i + 1:i + 2] != b"\n" or not line.startswith(b"data: {") or not line.endswith(b"}"):
            general = True
            break
        k = line.rfind(KEY)
        m = VALUE.match(line, k + len(KEY)) if k >= 0 else None
        if m is None:
            general = True
            break
        n = int(m[1])
        if n > prev:
            tokens.append(n - prev)
            prev = n
        last_at, last_end = start, i
        start = i + 2
    return (start, prev, last_at, last_end, general), tokens


def sglang_event(n: int, text: str = "tok ") -> bytes:
    """An event shaped like SGLang's (python/sglang/srt/managers/tokenizer_manager.py: meta_info
    with completion_tokens then cached_tokens), compact JSON as its server writes it."""
    meta = {"id": "r", "finish_reason": None, "prompt_tokens": 7, "completion_tokens": n,
            "cached_tokens": 0}
    return b"data: " + json.dumps({"text": text * n, "meta_info": meta},
                                  separators=(",", ":")).encode() + b"\n\n"


def check(buf: bytes, prev: int = 0) -> tuple[int, int, int, int, bool]:
    tokens: list[int] = []
    got = scan(buf, prev, tokens)
    want, want_tokens = reference_scan(buf, prev)
    assert (got, tokens) == (want, want_tokens), buf
    return got


def test_well_formed_events_are_counted_in_one_call() -> None:
    buf = sglang_event(1) + sglang_event(3) + sglang_event(3) + sglang_event(4)
    tokens: list[int] = []
    end, prev, last_at, last_end, general = scan(buf, 0, tokens)
    assert tokens == [1, 2, 1]  # the repeated count adds nothing
    assert (end, prev, general) == (len(buf), 4, False)
    assert buf[last_at:last_end] == sglang_event(4)[:-2]
    check(buf)


def test_incomplete_tail_stays_for_the_next_read() -> None:
    whole = sglang_event(1) + sglang_event(2)
    for cut in range(len(sglang_event(1)), len(whole)):
        end, prev, *_, general = check(whole[:cut])
        assert (end, prev, general) == (len(sglang_event(1)), 1, False)


@pytest.mark.parametrize("line", [
    b": keep-alive",  # comment
    b"data: [DONE]",
    b'data: {"error": {"message": "boom"}}',  # no key
    b'data: {"meta_info": {"completion_tokens": "7"}}',  # a string
    b'data: {"meta_info": {"completion_tokens": -7}}',
    b'data: {"meta_info": {"completion_tokens": 1.5}}',
    b'data: {"meta_info": {"completion_tokens": 1234567890123456789}}',  # 19 digits
    b'data: {"meta_info": {"completion_tokens": }}',
    b'data: {"meta_info": {"completion_tokens": 7',  # no closing brace
    b'data:{"meta_info": {"completion_tokens": 7}}',  # no space after the colon
    b'event: message',
])
def test_lines_outside_the_rule_go_to_the_general_path(line: bytes) -> None:
    first = sglang_event(2)
    end, prev, *_, general = check(first + line + b"\n\n" + sglang_event(3), prev=0)
    assert (end, prev, general) == (len(first), 2, True)


def test_crlf_anywhere_sends_the_whole_read_to_the_general_path() -> None:
    assert check(sglang_event(1) + b"\r")[4] is True
    assert check(sglang_event(1).replace(b"\n", b"\r\n"))[:2] == (0, 0)


def test_last_key_wins_and_whitespace_is_allowed() -> None:
    buf = (b'data: {"other": {"completion_tokens": 99}, "meta_info": {"completion_tokens":\t12 ,'
           b' "x": 1}}\n\n')
    tokens: list[int] = []
    assert scan(buf, 5, tokens)[:2] == (len(buf), 12) and tokens == [7]
    check(buf, 5)


def test_argument_errors() -> None:
    with pytest.raises(TypeError):
        scan("text", 0, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        scan(b"", 0, ())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        scan(b"", 0)  # type: ignore[call-arg]
    assert scan(b"", 0, []) == (0, 0, -1, -1, False)


ALPHABET = [b"\n", b"\n\n", b"\r", b"}", b"{", b'"', b":", b",", b" ", b"0", b"7", b"9",
            b"data: {", KEY, b"-", b"x", b"\x00", b"\xff"]


def test_random_and_mutated_reads_agree_with_the_model() -> None:
    rng = random.Random(12)
    for _ in range(4000):
        events = [sglang_event(rng.randint(0, 40), rng.choice(["tok ", "", '\\"', "ü"]))
                  for _ in range(rng.randint(0, 4))]
        buf = bytearray(b"".join(events))
        for _ in range(rng.choice([0, 0, 1, 2, 5])):  # insert, delete or replace at random
            at = rng.randint(0, len(buf))
            op = rng.random()
            if op < 0.4:
                buf[at:at] = rng.choice(ALPHABET)
            elif op < 0.7:
                del buf[at:at + rng.randint(1, 8)]
            else:
                buf[at:at + 1] = rng.choice(ALPHABET)
        data = bytes(buf)
        check(data[:rng.randint(0, len(data))] if rng.random() < 0.3 else data,
              prev=rng.choice([0, 0, 3, 40]))
