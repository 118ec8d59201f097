"""The simulator's SSE chunks against shapes recorded from SGLang 0.5.23's own serializers.

RECORDED holds the JSON SGLang writes (ids, timestamps and text aside), produced by
python/sglang/srt/entrypoints/openai/sse_utils.py ``build_sse_content`` (chat chunks),
protocol.py ``CompletionStreamResponse.model_dump_json()`` (completion chunks, and
``exclude_none=True`` for the usage chunk, serving_completions.py) and
``ChatCompletionStreamResponse.model_dump_json()`` (chat usage chunk, serving_chat.py); the
native /generate meta_info order is tokenizer_manager.py ``_handle_batch_output``. With
SPECGRID_SGLANG_PYTHON set, the chat chunks are regenerated from SGLang itself and compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

import httpx
import pytest

from tests.engines.sim.conftest import sse_json

RECORDED: dict[str, Any] = {
    "chat_role": {"id": "ID", "object": "chat.completion.chunk", "created": 0, "model": "M",
                  "choices": [{"index": 0, "delta": {"reasoning_content": None,
                                                     "role": "assistant", "content": ""},
                               "logprobs": None, "finish_reason": None, "matched_stop": None}]},
    "chat_content": {"id": "ID", "object": "chat.completion.chunk", "created": 0, "model": "M",
                     "choices": [{"index": 0, "delta": {"reasoning_content": None,
                                                        "content": "T"},
                                  "logprobs": None, "finish_reason": None,
                                  "matched_stop": None}]},
    "chat_finish": {"id": "ID", "object": "chat.completion.chunk", "created": 0, "model": "M",
                    "choices": [{"index": 0, "delta": {"reasoning_content": None},
                                 "logprobs": None, "finish_reason": "length",
                                 "matched_stop": None}]},
    "chat_usage": {"id": "ID", "object": "chat.completion.chunk", "created": 0, "model": "M",
                   "choices": [], "usage": {"prompt_tokens": 0, "total_tokens": 0,
                                            "completion_tokens": 0,
                                            "prompt_tokens_details": None,
                                            "reasoning_tokens": 0,
                                            "completion_tokens_details": None}},
    "completion_content": {"id": "ID", "object": "text_completion", "created": 0, "model": "M",
                           "choices": [{"index": 0, "text": "T", "logprobs": None,
                                        "finish_reason": None, "matched_stop": None}],
                           "usage": None},
    "completion_final": {"id": "ID", "object": "text_completion", "created": 0, "model": "M",
                         "choices": [{"index": 0, "text": "T", "logprobs": None,
                                      "finish_reason": "length", "matched_stop": None}],
                         "usage": None},
    "completion_usage": {"id": "ID", "object": "text_completion", "created": 0, "model": "M",
                         "choices": [], "usage": {"prompt_tokens": 0, "total_tokens": 0,
                                                  "completion_tokens": 0,
                                                  "reasoning_tokens": 0}},
}
NATIVE_META_ORDER = ["id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
                     "reasoning_tokens", "completion_tokens", "cached_tokens"]
"""Without --enable-metrics (no request time stats), then cached_tokens_details and dp_rank;
the first chunk adds response_sent_to_client_ts, the last weight_versions before them."""
NATIVE_META_TAIL = ["cached_tokens_details", "dp_rank"]
NATIVE_FINAL_SPEC = ["e2e_latency", "spec_accept_rate", "spec_accept_length",
                     "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct",
                     "spec_correct_drafts_histogram"]
SGLEXT_CHAT = json.loads(
    '{"id":"abc","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    '"usage":null,"sglext":{"spec_tokens_details":{"spec_accept_rate":0.5,'
    '"spec_accept_length":2.0,"spec_cap_length":0.0,"spec_block_accept_length":0.0,'
    '"spec_num_correct_drafts":3,"spec_num_proposed_drafts":6,"spec_verify_ct":3,'
    '"spec_correct_drafts_histogram":[1,1,1],"spec_cap_lens_histogram":[]}}}')
"""SGLang 0.5.23's own ``ChatCompletionStreamResponse(id="abc", created=1, choices=[],
model="m", sglext=SglExt(spec_tokens_details=SpecTokensDetails(...)).split_ids()[0])
.model_dump_json()`` (entrypoints/openai/protocol.py, as serving_chat.py writes the sglext
chunk), run once in the engine environment; the completions chunk is the same with
``"object":"text_completion"`` (CompletionStreamResponse)."""


def normal(chunk: dict[str, Any]) -> dict[str, Any]:
    """Blank out what differs per request: id, created, model, text and token counts."""
    out = json.loads(json.dumps(chunk))
    out.update(id="ID", created=0, model="M")
    for c in out["choices"]:
        if c.get("text"):
            c["text"] = "T"
        if c.get("delta", {}).get("content"):
            c["delta"]["content"] = "T"
    if out.get("usage"):
        out["usage"] = {k: (0 if k.endswith("_tokens") and k != "reasoning_tokens" else v)
                        for k, v in out["usage"].items()}
    return out


def same(a: Any, b: Any) -> bool:
    """Equal values and equal key order at every level."""
    return json.dumps(a) == json.dumps(b)


@pytest.fixture(scope="module")
def sim_url() -> Any:
    from tests.engines.sim.conftest import start_sim

    sim = start_sim(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                     "--sim-time-scale", "0"])
    yield sim.url
    sim.stop()


def test_chat_stream_shapes(sim_url: str) -> None:
    r = httpx.post(sim_url + "/v1/chat/completions", timeout=30, json={
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    chunks = [normal(c) for c in sse_json(r.content)]
    assert same(chunks[0], RECORDED["chat_role"])
    assert all(same(c, RECORDED["chat_content"]) for c in chunks[1:-2])
    assert same(chunks[-2], RECORDED["chat_finish"])
    assert same(chunks[-1], RECORDED["chat_usage"])
    assert re.fullmatch(r"[0-9a-f]{32}", sse_json(r.content)[0]["id"])  # no chatcmpl- prefix


def test_completion_stream_shapes(sim_url: str) -> None:
    r = httpx.post(sim_url + "/v1/completions", timeout=30, json={
        "model": "m", "prompt": "def f(x):", "max_tokens": 9, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True}})
    chunks = [normal(c) for c in sse_json(r.content)]
    assert all(same(c, RECORDED["completion_content"]) for c in chunks[:-2])
    assert same(chunks[-2], RECORDED["completion_final"])  # text and finish in one chunk
    assert same(chunks[-1], RECORDED["completion_usage"])
    assert re.fullmatch(r"[0-9a-f]{32}", sse_json(r.content)[0]["id"])  # no cmpl- prefix


def shape(value: Any) -> Any:
    """The value with every number and list blanked, keys and their order kept."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return []
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    return type(value)(0)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_spec_tokens_details_chunk_before_the_usage_chunk(sim_url: str, path: str) -> None:
    chat = path.endswith("chat/completions")
    body: dict[str, Any] = {"model": "m", "max_tokens": 30, "ignore_eos": True, "stream": True,
                            "return_spec_tokens_details": True,
                            "stream_options": {"include_usage": True}}
    body.update({"messages": [{"role": "user", "content": "def f(x):"}]} if chat
                else {"prompt": "def f(x):"})
    chunks = sse_json(httpx.post(sim_url + path, timeout=30, json=body).content)
    ext = chunks[-2]
    assert chunks[-3]["choices"][0]["finish_reason"] == "length" and "usage" in chunks[-1]
    want = {**SGLEXT_CHAT, "object": "chat.completion.chunk" if chat else "text_completion"}
    assert same(shape({**ext, "id": "abc", "created": 1, "model": "m"}), shape(want))
    d = ext["sglext"]["spec_tokens_details"]
    assert sum(d["spec_correct_drafts_histogram"]) == d["spec_verify_ct"] > 0
    assert d["spec_num_proposed_drafts"] == 3 * d["spec_verify_ct"]
    assert d["spec_accept_rate"] == d["spec_num_correct_drafts"] / d["spec_num_proposed_drafts"]
    # not asked: no sglext chunk (the finish chunk, then the usage chunk)
    del body["return_spec_tokens_details"]
    plain = sse_json(httpx.post(sim_url + path, timeout=30, json=body).content)
    assert not any("sglext" in c for c in plain)


def test_spec_tokens_details_last_in_a_non_streaming_body(sim_url: str) -> None:
    """serving_chat.py: ``sglext=response_sglext`` after ``metadata`` (ChatCompletionResponse's
    field order), the details as on the stream."""
    body = {"model": "m", "max_tokens": 30, "ignore_eos": True,
            "messages": [{"role": "user", "content": "def f(x):"}]}
    plain = httpx.post(sim_url + "/v1/chat/completions", timeout=30, json=body).json()
    assert "sglext" not in plain
    asked = httpx.post(sim_url + "/v1/chat/completions", timeout=30,
                       json={**body, "return_spec_tokens_details": True}).json()
    assert list(asked)[-2:] == ["metadata", "sglext"]
    d = asked["sglext"]["spec_tokens_details"]
    assert list(d) == list(SGLEXT_CHAT["sglext"]["spec_tokens_details"])
    assert sum(d["spec_correct_drafts_histogram"]) == d["spec_verify_ct"] > 0


def test_native_meta_info_order(sim_url: str) -> None:
    r = httpx.post(sim_url + "/generate", timeout=30, json={
        "text": "def f(x): return x", "stream": True,
        "sampling_params": {"max_new_tokens": 12, "ignore_eos": True, "temperature": 0}})
    events = sse_json(r.content)
    for i, e in enumerate(events[:-1]):
        assert list(e) == ["text", "output_ids", "meta_info"]
        first = ["response_sent_to_client_ts"] if i == 0 else []
        # no e2e_latency before the end
        assert list(e["meta_info"]) == NATIVE_META_ORDER + NATIVE_META_TAIL + first
        assert len(e["output_ids"]) == e["meta_info"]["completion_tokens"]  # cumulative
    last = events[-1]["meta_info"]
    assert list(last) == (NATIVE_META_ORDER + ["weight_versions"] + NATIVE_META_TAIL
                          + NATIVE_FINAL_SPEC)
    assert last["spec_num_proposed_drafts"] == 3 * last["spec_verify_ct"]


SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(os.pathsep)[0]
_PROBE = r"""
import importlib.util, json, sglang, os
path = os.path.join(os.path.dirname(sglang.__file__), "srt/entrypoints/openai/sse_utils.py")
spec = importlib.util.spec_from_file_location("sse_utils", path)
s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)
b = lambda **kw: json.loads(s.build_sse_content(chunk_id="ID", created=0, model="M", index=0,
                                                 **kw)[len("data: "):])
print(json.dumps({"chat_role": b(role="assistant", content=""), "chat_content": b(content="T"),
                  "chat_finish": b(finish_reason="length")}))
"""


@pytest.mark.skipif(not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set")
def test_recorded_chat_chunks_are_sglangs() -> None:
    proc = subprocess.run([SGLANG_PYTHON, "-c", _PROBE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    live = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, value in live.items():
        assert same(value, RECORDED[key]), key


# SGLang 0.5.23 entrypoints/http_server.py model_info (its keys, in order)
MODEL_INFO_KEYS = ["model_path", "served_model_name", "tokenizer_path", "is_generation",
                   "preferred_sampling_params", "weight_version", "load_format",
                   "reasoning_parser", "tool_call_parser", "disaggregation_mode",
                   "has_image_understanding", "has_audio_understanding", "model_type",
                   "architectures"]
# memory_usage.py build_memory_usage
MEMORY_USAGE_KEYS = ["weight", "kvcache", "startup_available", "token_capacity",
                     "token_capacity_swa", "graph"]


def test_model_info_and_server_info_fields(sim_url: str) -> None:
    mi = httpx.get(sim_url + "/model_info").json()
    assert list(mi)[:len(MODEL_INFO_KEYS)] == MODEL_INFO_KEYS
    assert mi["architectures"] == ["DeepseekV3ForCausalLM"]  # the default Kimi-class profile
    si = httpx.get(sim_url + "/server_info").json()
    for key in ("launch_command", "status", "max_total_num_tokens", "max_req_input_len",
                "startup_time", "internal_states", "version", "frontend"):
        assert key in si, key
    state = si["internal_states"][0]
    assert list(state["memory_usage"]) == MEMORY_USAGE_KEYS
    for key in ("world_size", "effective_max_running_requests_per_dp", "last_gen_throughput",
                "disaggregation_mode", "decode_cuda_graph_bs", "avg_spec_accept_length"):
        assert key in state, key
    # a speculative server with max_running_requests 48 captures the speculative list up to 48
    assert state["decode_cuda_graph_bs"][:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    assert state["decode_cuda_graph_bs"][-1] == 48
