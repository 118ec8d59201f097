"""The official OpenAI Python client streams a chat completion from the simulator."""

from __future__ import annotations

import openai

from tests.engines.sim.conftest import LaunchSim


def test_openai_client_streams_chat(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--api-key", "k-123", "--speculative-algorithm", "EAGLE3",
                      "--max-running-requests", "8", "--sim-time-scale", "0.02",
                      "--served-model-name", "sim-model"])
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="k-123", timeout=30)
    stream = client.chat.completions.create(
        model="sim-model",
        messages=[{"role": "system", "content": "You are a coding assistant."},
                  {"role": "user", "content": "Write a Python function that reverses a list."}],
        max_tokens=32, temperature=0, stream=True, stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    finish = None
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    text = "".join(pieces)
    assert usage is not None and usage.completion_tokens == len(text.split())
    assert finish in ("length", "stop")
    assert usage.completion_tokens <= 32
    # a wrong key is refused with 401, as SGLang does
    bad = openai.OpenAI(base_url=sim.url + "/v1", api_key="wrong", max_retries=0)
    try:
        bad.chat.completions.create(model="sim-model", messages=[{"role": "user", "content": "x"}])
    except openai.AuthenticationError as exc:
        assert exc.status_code == 401
    else:  # pragma: no cover
        raise AssertionError("wrong key accepted")
    # non-streaming through the client too
    resp = client.completions.create(model="sim-model", prompt="def add(a, b):", max_tokens=6,
                                     temperature=0, extra_body={"ignore_eos": True})
    assert resp.usage is not None and resp.usage.completion_tokens == 6
    assert len(resp.choices[0].text.split()) == 6
