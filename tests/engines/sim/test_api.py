"""Contract tests of every endpoint against a real simulator process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.engines.sim.conftest import LaunchSim, SimProcess, sse_events, sse_json, start_sim


@pytest.fixture(scope="module")
def spec_sim() -> Iterator[SimProcess]:
    """EAGLE-3 server with metrics, at 1/20 of modelled time."""
    sim = start_sim(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                     "--enable-metrics", "--sim-time-scale", "0.05", "--served-model-name",
                     "sim-model", "--mem-fraction-static", "0.8", "--attention-backend", "fa3",
                     "--sim-seed", "3"])
    yield sim
    sim.stop()
    sim.log_path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def base_sim() -> Iterator[SimProcess]:
    """Baseline server, no metrics, at 1/20 of modelled time."""
    sim = start_sim(["--sim-time-scale", "0.05", "--max-running-requests", "8"])
    yield sim
    sim.stop()
    sim.log_path.unlink(missing_ok=True)


def gen(sim: SimProcess, text: str, stream: bool, **sp: object) -> httpx.Response:
    body = {"text": text, "sampling_params": {"temperature": 0, **sp}, "stream": stream}
    return httpx.post(sim.url + "/generate", json=body, timeout=30)


def test_native_stream_framing_and_cumulative_text(spec_sim: SimProcess) -> None:
    r = gen(spec_sim, "Write a Python function that merges intervals.", True,
            max_new_tokens=40, ignore_eos=True)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.content.endswith(b"data: [DONE]\n\n")
    chunks = sse_json(r.content)
    prev_text, prev_n = "", 0
    for c in chunks:
        meta = c["meta_info"]
        assert c["text"].startswith(prev_text)  # cumulative text
        assert meta["completion_tokens"] >= prev_n  # cumulative count
        assert len(c["text"].split()) == meta["completion_tokens"]
        assert meta["prompt_tokens"] == 12  # ceil(47 / 4)
        prev_text, prev_n = c["text"], meta["completion_tokens"]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    last = chunks[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 40}
    assert last["completion_tokens"] == 40
    assert len({c["meta_info"]["id"] for c in chunks}) == 1
    # speculation: several tokens per chunk, SGLang's accept fields on the last chunk
    assert any(b["meta_info"]["completion_tokens"] - a["meta_info"]["completion_tokens"] > 1
               for a, b in zip(chunks, chunks[1:], strict=False))
    assert last["spec_accept_length"] == pytest.approx(40 / last["spec_verify_ct"])
    # tokens = 1 + verifies + drafts, the last verify's drafts counted as accepted, up to k = 3
    # past max_new_tokens (SGLang 0.5.23 batch_result_processor.py _resolve_spec_v2_tokens)
    assert 0 <= last["spec_num_correct_drafts"] - (40 - 1 - last["spec_verify_ct"]) <= 3
    hist = last["spec_correct_drafts_histogram"]
    assert sum(hist) == last["spec_verify_ct"]
    assert sum(n * h for n, h in enumerate(hist)) == last["spec_num_correct_drafts"]
    assert last["spec_num_proposed_drafts"] == 3 * last["spec_verify_ct"]
    assert last["spec_accept_rate"] == pytest.approx(
        last["spec_num_correct_drafts"] / last["spec_num_proposed_drafts"])
    assert "e2e_latency" in last
    # compact JSON, as SGLang's orjson writes it (byte-level clients rely on it)
    assert re.search(rb'"completion_tokens":\d+', r.content)


def test_native_non_stream_and_determinism(base_sim: SimProcess) -> None:
    a = gen(base_sim, "Explain the history of the Silk Road.", False, max_new_tokens=20,
            ignore_eos=True).json()
    b = gen(base_sim, "Explain the history of the Silk Road.", False, max_new_tokens=20,
            ignore_eos=True).json()
    assert a["text"] == b["text"]  # temperature 0: same prompt, same text
    assert len(a["text"].split()) == a["meta_info"]["completion_tokens"] == 20
    assert len(a["output_ids"]) == 20
    assert a["meta_info"]["finish_reason"] == {"type": "length", "length": 20}
    assert "spec_verify_ct" not in a["meta_info"]


def test_eos_and_stop_strings(base_sim: SimProcess) -> None:
    r = gen(base_sim, "Describe the geography of Iceland.", False, max_new_tokens=3000).json()
    meta = r["meta_info"]
    assert meta["finish_reason"]["type"] == "stop"  # natural EOS long before 3000
    assert meta["finish_reason"]["matched"] == 128009
    assert meta["completion_tokens"] < 3000
    assert len(r["text"].split()) == meta["completion_tokens"]
    words = gen(base_sim, "Who painted the Sistine Chapel?", False, max_new_tokens=30,
                ignore_eos=True).json()["text"].split()
    stop = words[5]
    r = gen(base_sim, "Who painted the Sistine Chapel?", True, max_new_tokens=30,
            ignore_eos=True, stop=[stop])
    last = sse_json(r.content)[-1]
    assert last["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert f" {stop} " not in last["text"] + " " and stop not in last["text"].split()
    assert last["meta_info"]["completion_tokens"] == words.index(stop) + 1


def test_chat_stream_with_usage(spec_sim: SimProcess) -> None:
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "Write a SQL query."}],
            "max_tokens": 25, "stream": True, "stream_options": {"include_usage": True},
            "temperature": 0}
    r = httpx.post(spec_sim.url + "/v1/chat/completions", json=body, timeout=30)
    chunks = sse_json(r.content)
    # SGLang: sse_utils.py StreamDelta (reasoning_content always serialized)
    assert chunks[0]["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant",
                                                "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish[-1]["choices"][0]["finish_reason"] in ("length", "stop")
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == len(text.split())
    # prompt: ceil(18 / 4) = 5 content tokens + 4 per message + 3 for the reply header
    assert usage["usage"]["prompt_tokens"] == 12
    assert usage["model"] == "sim-model"


def test_chat_and_completions_non_stream(base_sim: SimProcess) -> None:
    r = httpx.post(base_sim.url + "/v1/chat/completions", timeout=30, json={
        "model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 7,
        "ignore_eos": True}).json()
    assert r["object"] == "chat.completion"
    assert r["choices"][0]["finish_reason"] == "length"
    content = r["choices"][0]["message"]["content"]
    assert len(content.split()) == 7 == r["usage"]["completion_tokens"]
    r2 = httpx.post(base_sim.url + "/v1/completions", timeout=30, json={
        "model": "m", "prompt": "def f(x):", "max_tokens": 5, "ignore_eos": True,
        "temperature": 0}).json()
    assert r2["object"] == "text_completion" and r2["usage"]["completion_tokens"] == 5
    s = httpx.post(base_sim.url + "/v1/completions", timeout=30, json={
        "model": "m", "prompt": "def f(x):", "max_tokens": 5, "ignore_eos": True, "temperature": 0,
        "stream": True})
    chunks = sse_json(s.content)
    assert "".join(c["choices"][0]["text"] for c in chunks).split() == r2["choices"][0][
        "text"].split()


def test_bad_requests(base_sim: SimProcess) -> None:
    assert httpx.post(base_sim.url + "/generate", content=b"{nope").status_code == 400
    assert httpx.post(base_sim.url + "/generate", json={"sampling_params": {}}).status_code == 400
    r = httpx.post(base_sim.url + "/v1/chat/completions", json={"model": "m"})
    assert r.status_code == 400 and r.json()["object"] == "error"


def test_info_endpoints(spec_sim: SimProcess) -> None:
    for path in ("/server_info", "/get_server_info"):
        info = httpx.get(spec_sim.url + path).json()
        assert info["version"] == "0.5.23-sim"
        assert info["simulated"] is True and info["engine"] == "specgrid-sim"
        assert info["speculative_algorithm"] == "EAGLE3"
        assert info["max_running_requests"] == 48  # SGLang's silent cap, logged by the sim
        assert info["mem_fraction_static"] == 0.8  # sizes the KV pool
        assert info["attention_backend"] == "fa3"  # unmodelled flags are still recorded
        assert "internal_states" in info and "last_gen_throughput" in info["internal_states"][0]
        assert "CUDA_DEVICE_MAX_CONNECTIONS" in info["sim"]["not_modelled_env"]
    for path in ("/model_info", "/get_model_info"):
        mi = httpx.get(spec_sim.url + path).json()
        assert mi["is_generation"] is True and mi["simulated"] is True
        assert mi["engine"] == "specgrid-sim" and mi["model_path"] == "specgrid/sim-model"
    assert httpx.get(spec_sim.url + "/v1/models").json()["data"][0]["id"] == "sim-model"
    assert httpx.get(spec_sim.url + "/health_generate").status_code == 200
    assert httpx.get(spec_sim.url + "/ready").status_code == 200
    assert "attention-backend is accepted but not modelled" in spec_sim.log()
    assert "capped at 48" in spec_sim.log()
    assert "The server is fired up and ready to roll!" in spec_sim.log()
    assert "SIMULATED" in spec_sim.log()


def test_flush_cache_busy_then_ok_and_resets_accept_average(spec_sim: SimProcess) -> None:
    gen(spec_sim, "Implement a linked list in Python.", False, max_new_tokens=30,
        ignore_eos=True)
    assert httpx.get(spec_sim.url + "/server_info").json()["internal_states"][0][
        "avg_spec_accept_length"] > 1.0
    done = threading.Event()

    def long_request() -> None:
        gen(spec_sim, "Write a compiler in Rust.", False, max_new_tokens=3000, ignore_eos=True)
        done.set()

    t = threading.Thread(target=long_request)
    t.start()
    while httpx.get(spec_sim.url + "/server_info").json()["internal_states"][0][
            "num_running_reqs"] == 0:
        time.sleep(0.01)
    # SGLang 0.5.23 http_server.py flush_cache + flush_wrapper.py: busy -> 400, no message
    busy = httpx.post(spec_sim.url + "/flush_cache")
    assert busy.status_code == 400 and busy.text == "Flush cache failed.\n"
    waited = httpx.post(spec_sim.url + "/flush_cache", params={"timeout": "0.05"})
    assert waited.status_code == 400 and waited.text == "Timed out waiting for idle state."
    t.join(30)
    assert done.is_set()
    assert httpx.post(spec_sim.url + "/flush_cache").status_code == 200
    assert httpx.get(spec_sim.url + "/flush_cache").status_code == 200  # SGLang accepts GET too
    assert httpx.get(spec_sim.url + "/server_info").json()["internal_states"][0][
        "avg_spec_accept_length"] == 0.0


def test_metrics(spec_sim: SimProcess, base_sim: SimProcess) -> None:
    assert httpx.get(base_sim.url + "/metrics").status_code == 404  # no --enable-metrics
    gen(spec_sim, "Write a regex for emails.", False, max_new_tokens=10, ignore_eos=True)
    text = httpx.get(spec_sim.url + "/metrics").text
    # labels as SGLang 0.5.23 python/sglang/srt/observability/metrics_collector.py:
    # scheduler gauges {model_name, engine_type, tp_rank, pp_rank, moe_ep_rank}; request
    # metrics {model_name, engine_type} plus is_streaming on the per-request counters/histograms
    # (prometheus_client writes label names sorted)
    sched = 'engine_type="unified",model_name="sim-model",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput",
                 "sglang:spec_accept_length", "sglang:token_usage", "sglang:cache_hit_rate"):
        assert f"{name}{{{sched}}}" in text, name
    tok = 'engine_type="unified",model_name="sim-model"'
    req = 'engine_type="unified",is_streaming="false",model_name="sim-model"'
    for name in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total",
                 "sglang:num_requests_total", "sglang:e2e_request_latency_seconds_sum"):
        assert f'{name}{{{req}}}' in text, name
    ttft = re.search(r'sglang:time_to_first_token_seconds_bucket\{engine_type="unified",'
                     r'is_streaming="false",le="\+Inf",model_name="sim-model"\} ([0-9.]+)', text)
    assert ttft and float(ttft.group(1)) >= 1
    assert f"sglang:inter_token_latency_seconds_count{{{tok}}}" in text
    assert f"sglang:spec_verify_calls_total{{{tok}}}" in text
    m = re.search(r'sglang:generation_tokens_total\{[^}]*is_streaming="false"[^}]*\} ([0-9.]+)',
                  text)
    assert m and float(m.group(1)) >= 10


def test_a_slowed_down_simulator_answers_its_health_check_within_a_probes_wait(
        launch_sim: LaunchSim) -> None:
    # x8 slower than modelled: SGLang's health check polls every second, the simulator every
    # second of the wall's at most; a readiness probe waits 5 s (actors/server.py poll_ready)
    sim = launch_sim(["--sim-time-scale", "8"], wait="listen")
    deadline = time.monotonic() + 20.0
    while httpx.get(sim.url + "/ready", timeout=2.0).status_code != 200:
        assert time.monotonic() < deadline, sim.log()
        time.sleep(0.1)
    started = time.monotonic()
    assert httpx.get(sim.url + "/health", timeout=5.0).status_code == 200
    assert time.monotonic() - started < 5.0


def test_api_key(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--api-key", "sekret", "--sim-time-scale", "0", "--enable-metrics"])
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 3}}
    assert httpx.get(sim.url + "/health").status_code == 200  # open, as in SGLang
    assert httpx.get(sim.url + "/metrics").status_code == 200  # open, as in SGLang
    r = httpx.post(sim.url + "/generate", json=body)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(sim.url + "/generate", json=body, headers=wrong).status_code == 401
    assert httpx.get(sim.url + "/server_info", headers=wrong).status_code == 401
    ok = {"Authorization": "Bearer sekret"}
    assert httpx.post(sim.url + "/generate", json=body, headers=ok).status_code == 200
    assert httpx.get(sim.url + "/server_info", headers=ok).json()["api_key"] == "<set>"
    info = httpx.get(sim.url + "/server_info", headers=ok)
    assert "sekret" not in info.text and "--api-key ***" in info.json()["launch_command"]
    assert httpx.get(sim.url + "/ready").status_code == 200  # open, as in SGLang
    assert httpx.post(sim.url + "/flush_cache").status_code == 401
    assert httpx.post(sim.url + "/flush_cache", headers=ok).status_code == 200


SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(os.pathsep)[0]
AUTH_CASES = [(method, path, header)
              for method, path in [("GET", "/health"), ("GET", "/health_generate"),
                                   ("GET", "/ready"), ("GET", "/metrics"),
                                   ("GET", "/server_info"), ("GET", "/v1/models"),
                                   ("POST", "/generate"), ("POST", "/v1/chat/completions"),
                                   ("POST", "/flush_cache"), ("OPTIONS", "/generate")]
              for header in (None, "Bearer sekret", "bearer sekret", "Bearer nope", "sekret")]
# SGLang's own decision (python/sglang/srt/utils/auth.py decide_request_auth) with only
# --api-key set; its ADMIN_OPTIONAL routes (/flush_cache) then decide as NORMAL ones.
_AUTH_PROBE = r"""
import json, sys
from sglang.srt.utils.auth import AuthLevel, decide_request_auth
cases = json.loads(sys.argv[1])
print(json.dumps([decide_request_auth(method=m, path=p, authorization_header=h, api_key="sekret",
                                      admin_api_key=None, auth_level=AuthLevel.NORMAL).allowed
                  for m, p, h in cases]))
"""


@pytest.mark.skipif(not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set")
def test_api_key_is_enforced_as_sglang_decides(launch_sim: LaunchSim) -> None:
    proc = subprocess.run([SGLANG_PYTHON, "-c", _AUTH_PROBE, json.dumps(AUTH_CASES)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    allowed = json.loads(proc.stdout.strip().splitlines()[-1])
    sim = launch_sim(["--api-key", "sekret", "--sim-time-scale", "0", "--enable-metrics"])
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1},
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    for (method, path, header), sglang_allows in zip(AUTH_CASES, allowed, strict=True):
        headers = {"Authorization": header} if header else {}
        r = httpx.request(method, sim.url + path, headers=headers,
                          json=body if method == "POST" else None)
        assert (r.status_code != 401) == sglang_allows, (method, path, header, r.status_code)


def test_503_while_starting(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-startup-seconds", "1.5", "--sim-time-scale", "0"], wait="listen")
    assert httpx.get(sim.url + "/health").status_code == 503
    assert httpx.get(sim.url + "/health_generate").status_code == 503
    r = httpx.post(sim.url + "/generate", json={"text": "x"})
    assert r.status_code == 503
    assert "fired up" not in sim.log()
    deadline = time.monotonic() + 10
    while httpx.get(sim.url + "/health").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert httpx.post(sim.url + "/generate", json={"text": "x"}).status_code == 200
    assert "The server is fired up and ready to roll!" in sim.log()


def test_sigterm_exits_cleanly(launch_sim: LaunchSim) -> None:
    sim = launch_sim(["--sim-time-scale", "0"])
    assert sim.stop() == 0
    assert "Shutting down" in sim.log()


def test_stream_events_are_blank_line_framed(base_sim: SimProcess) -> None:
    with httpx.stream("POST", base_sim.url + "/generate", json={
            "text": "abc", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True},
            "stream": True}) as r:
        raw = b"".join(r.iter_bytes())
    events = sse_events(raw)
    assert events[-1] == "[DONE]" and len(events) == 6
    assert all(json.loads(e)["text"] for e in events[:-1])
