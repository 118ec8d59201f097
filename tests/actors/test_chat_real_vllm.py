"""The chat stream against a real vLLM 0.32.0 server (the session's `plain_vllm`, tiny model,
speculating with a draft model: chunks of several tokens, and `"content": ""` chunks for
tokens that end inside a UTF-8 character): every request has a first token and its chunks
carry all of its tokens. Marked real_engine (`python -m pytest -q -m real_engine -n 0`)."""

from __future__ import annotations

import asyncio

import pytest

from actors.loadgen.runner import run_load
from actors.loadgen.spec import LoadSpec, Prompt

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(600)]  # a server start: 45-130 s


def test_every_chat_request_has_ttft_and_all_its_tokens(plain_vllm: str) -> None:
    prompts = tuple(Prompt(f"p{i}", text, "chat") for i, text in enumerate(
        ["Hello there", "Write a function", "What is a cat?", "Sort this list"]))
    spec = LoadSpec(url=plain_vllm, prompts=prompts, endpoint="chat", model="tiny",
                    num_requests=8, concurrency=4, max_new_tokens=64, ignore_eos=True,
                    request_timeout_s=120.0)
    res = asyncio.run(run_load(spec))
    assert len(res.rows) == 8
    for row in res.rows:
        assert row["status"] == "ok", row["error"]
        assert row["output_tokens"] == 64
        assert row["ttft_s"] is not None and row["ttft_s"] == row["ttft_s"]  # not NaN
        assert sum(row["chunk_tokens"]) == row["output_tokens"], row["chunk_tokens"]
