"""The simulator against responses recorded from a real SGLang 0.5.23 server.

The fixtures in tests/engines/sim/fixtures/sglang-0.5.23/ come from scripts/record_sglang.py
(re-record: ``/work/main/.venv-engines/bin/python scripts/record_sglang.py``). This test sends
the simulator the same requests and diffs SHAPES, not values: the JSON keys (recursively, in
order) and value types of /generate bodies and SSE events of every endpoint, the id format,
/metrics names / types / label keys, /server_info keys, and the health and flush answers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engines.sim.conftest import SimProcess, start_sim

FIXTURES = Path(__file__).parent / "fixtures" / "sglang-0.5.23"
NULLABLE = {"cached_tokens_details", "finish_reason", "matched_stop"}
"""Keys whose value is null in some responses and set in others (a null on one side matches
any type on the other): cached_tokens_details is null without a prefix-cache hit,
finish_reason until the last chunk, matched_stop unless a stop string matched."""
REAL_ID = re.compile(r"^[0-9a-f]{32}$")

CONDITIONAL_METRICS: dict[str, tuple[str, list[str]]] = {
    # name: (type, label keys), from SGLang 0.5.23 observability/metrics_collector.py: labelled
    # counters that appear only once incremented, so the idle, non-speculative recording lacks
    # them.
    "sglang:num_aborted_requests_total": ("counter", ["engine_type", "model_name"]),
    "sglang:spec_verify_calls_total": ("counter", ["engine_type", "model_name"]),
    "sglang:num_retracted_requests_total":
        ("counter", ["engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"]),
}
REQUIRED_METRICS = {
    # what grid/report, engines/base.py and the client read, and the main scheduler gauges
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
    "sglang:gen_throughput", "sglang:cache_hit_rate", "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total", "sglang:num_requests_total", "sglang:spec_accept_length",
    "sglang:spec_accept_rate", "sglang:spec_num_draft_tokens", "sglang:spec_num_steps",
    "sglang:max_total_num_tokens", "sglang:context_len", "sglang:num_used_tokens",
    "sglang:kv_used_tokens", "sglang:kv_available_tokens", "sglang:num_retracted_reqs",
    "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds", "sglang:queue_time_seconds",
    "sglang:request_time_per_output_token_seconds",
}
LEFT_OUT_PREFIXES = (
    # real families the simulator deliberately does not expose: hardware / runtime internals
    # it does not model (CUDA graphs, DP attention, mamba / SWA pools, disaggregation queues,
    # routing keys, HTTP middleware, process CPU, per-stage latencies, memory)
    "sglang:cuda_graph", "sglang:is_cuda_graph", "sglang:dp_attention", "sglang:mamba_",
    "sglang:swa_", "sglang:num_decode_", "sglang:num_prefill_", "sglang:routing_key",
    "sglang:num_unique_running_routing_keys", "sglang:http_", "sglang:process_cpu",
    "sglang:scheduler_", "sglang:per_stage", "sglang:startup_", "sglang:graph_memory",
    "sglang:weight_memory", "sglang:kv_cache_memory", "sglang:prealloc_", "sglang:pending_",
    "sglang:fwd_occupancy", "sglang:utilization", "sglang:num_paused_reqs",
    "sglang:num_grammar_queue_reqs", "sglang:new_token_ratio", "sglang:decode_sum_seq_lens",
    "sglang:full_token_usage", "sglang:kv_evictable_tokens", "sglang:num_pages",
    "sglang:page_size", "sglang:realtime_tokens", "sglang:prefill_effective_tokens",
    "sglang:spec_block_accept_length", "sglang:spec_cap_length", "sglang:cached_tokens_total",
    "sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram",
    "sglang:uncached_prompt_tokens_histogram",
)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def diff_shape(real: Any, sim: Any, path: str = "$", key: str = "") -> list[str]:
    """Differences in keys (and their order) and value types, recursively. Lists compare
    their first elements; int and float are distinct, except that a float field may hold
    an integral value in one of them (JSON has one number type; 0.0 vs 0 is a difference)."""
    rt, st = type_name(real), type_name(sim)
    if rt != st:
        if key in NULLABLE and "null" in (rt, st):
            return []
        return [f"{path}: real {rt} ({json.dumps(real)[:60]}), sim {st} "
                f"({json.dumps(sim)[:60]})"]
    out: list[str] = []
    if isinstance(real, dict):
        if list(real) != list(sim):
            missing = [k for k in real if k not in sim]
            extra = [k for k in sim if k not in real]
            if missing or extra:
                out.append(f"{path}: missing {missing}, not in real {extra}")
            else:
                out.append(f"{path}: key order real {list(real)}, sim {list(sim)}")
        for k in real:
            if k in sim:
                out += diff_shape(real[k], sim[k], f"{path}.{k}", k)
    elif isinstance(real, list) and real and sim:
        out += diff_shape(real[0], sim[0], f"{path}[0]", key)
    return out


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    """The simulator as the recording's server was started (metrics on, the same context
    length and KV size), at 1/50 of modelled time."""
    model = fixture("server_info")["scalars"]["model_path"]
    proc = start_sim(["--model-path", model, "--enable-metrics", "--context-length", "4096",
                      "--max-total-tokens", "16384", "--sim-time-scale", "0.02",
                      "--sim-seed", "1"])
    yield proc
    proc.stop()
    proc.log_path.unlink(missing_ok=True)


def parse_sse(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        block = block.strip()
        if block:
            assert block.startswith("data: "), block[:80]
            payload = block[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def replay(sim: SimProcess, name: str) -> tuple[dict[str, Any], Any, httpx.Response]:
    """(the recording, the simulator's body or events, the response) for one request."""
    rec = fixture(name)
    body = dict(rec["request"]["body"])
    r = httpx.post(sim.url + rec["request"]["path"], json=body, timeout=60)
    assert r.status_code == rec["status"], r.text
    assert r.headers["content-type"].split(";")[0] == rec["content_type"]
    return rec, parse_sse(r.content) if body.get("stream") else r.json(), r


def classify(events: list[Any]) -> dict[str, Any]:
    """Events of a stream by role: first, middle (a content chunk), finish, usage-only."""
    data = [e for e in events if e != "[DONE]"]
    roles: dict[str, Any] = {"first": data[0], "last": data[-1]}
    if len(data) > 2:
        roles["middle"] = data[1]
    finish = [e for e in data if any(c.get("finish_reason") for c in e.get("choices", []))
              or (e.get("meta_info") or {}).get("finish_reason")]
    if finish:
        roles["finish"] = finish[0]
    return roles


@pytest.mark.parametrize("name", ["generate", "chat", "completions"])
def test_non_streaming_shapes(sim: SimProcess, name: str) -> None:
    rec, body, _ = replay(sim, name)
    assert diff_shape(rec["body"], body) == []


@pytest.mark.parametrize("name", ["generate_stream", "chat_stream", "chat_stream_usage",
                                  "completions_stream_usage",
                                  "completions_stream_include_usage"])
def test_stream_shapes(sim: SimProcess, name: str) -> None:
    rec, events, _ = replay(sim, name)
    assert events[-1] == "[DONE]" and rec["events"][-1] == "[DONE]"
    real, mine = classify(rec["events"]), classify(events)
    assert sorted(real) == sorted(mine)
    diffs = [d for role in real for d in diff_shape(real[role], mine[role], role)]
    assert diffs == []
    if "meta_info" not in rec["events"][0]:
        # every chunk but the usage-only one: same role shapes as the real stream's
        assert all("usage" in e for e in events[:-1]) == all(
            "usage" in e for e in rec["events"][:-1])


def test_ids_format(sim: SimProcess) -> None:
    """Ids are 32 hex chars, without OpenAI's chatcmpl- / cmpl- prefixes, in every endpoint
    (SGLang 0.5.23 uses the request's rid, uuid4().hex)."""
    for name in ("chat", "completions"):
        assert REAL_ID.match(fixture(name)["body"]["id"])
        _, body, _ = replay(sim, name)
        assert REAL_ID.match(body["id"]), body["id"]
    for name in ("chat_stream", "completions_stream_usage"):
        assert all(REAL_ID.match(e["id"]) for e in fixture(name)["events"][:-1])
        _, events, _ = replay(sim, name)
        ids = {e["id"] for e in events[:-1]}
        assert len(ids) == 1 and REAL_ID.match(ids.pop())
    _, body, _ = replay(sim, "generate")
    assert REAL_ID.match(body["meta_info"]["id"])


def test_meta_info_timings(sim: SimProcess) -> None:
    """Server-side timings mean what SGLang's mean: ``*_ts`` and ``*_time`` are epoch seconds
    (time.time() clock), latencies are seconds, ``decode_throughput`` tokens per second =
    (completion_tokens - 1) / (finished - first token)."""
    real = fixture("generate")["body"]["meta_info"]
    t0 = time.time()
    _, body, _ = replay(sim, "generate")
    t1 = time.time()
    for meta in (real, body["meta_info"]):
        ts = [meta[k] for k in ("request_received_ts", "api_server_dispatch_finish_ts",
                                "forward_entry_time", "prefill_finished_time",
                                "request_finished_ts", "response_sent_to_client_ts")]
        assert all(1.5e9 < t < 4e9 for t in ts)
        assert ts == sorted(ts)
        assert meta["request_finished_ts"] - meta["request_received_ts"] == pytest.approx(
            meta["e2e_latency"], abs=0.01)
        assert 0 < meta["first_token_latency"] <= meta["e2e_latency"]
        assert 0 <= meta["queue_time"] <= meta["first_token_latency"]
        decode_s = meta["e2e_latency"] - meta["first_token_latency"]
        assert meta["decode_throughput"] == pytest.approx(
            (meta["completion_tokens"] - 1) / decode_s, rel=0.05)
        assert meta["weight_versions"] == [{"version": "default", "start": 0,
                                            "end": meta["completion_tokens"]}]
    mine = body["meta_info"]
    assert t0 - 0.01 <= mine["request_received_ts"] <= mine["request_finished_ts"] <= t1 + 0.01


def _metric_families(text: str) -> dict[str, tuple[str, list[str]]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[str, list[str]]] = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("sglang:"):
            continue
        name = fam.name + ("_total" if fam.type == "counter" else "")
        keys: set[str] = set()
        for s in fam.samples:
            keys |= set(s.labels) - {"le", "quantile"}
        out[name] = (fam.type, sorted(keys))
    return out


def test_metrics_names_types_labels(sim: SimProcess) -> None:
    real = fixture("metrics")["families"]
    real_fams = {n: (f["type"], sorted({k for keys in f["samples"].values() for k in keys}))
                 for n, f in real.items()}
    # traffic first, so that per-request series exist (as in the recording)
    replay(sim, "generate")
    replay(sim, "chat_stream")
    r = httpx.get(sim.url + "/metrics", timeout=10)
    assert r.status_code == 200
    mine = _metric_families(r.text)
    known = {**real_fams, **CONDITIONAL_METRICS}
    not_real = sorted(set(mine) - set(known))
    assert not_real == [], "the simulator exposes names the real server does not have"
    wrong = {n: (mine[n], known[n]) for n in mine if mine[n] != known[n]}
    assert wrong == {}, "type or label keys differ: (sim, real)"
    missing = sorted(REQUIRED_METRICS - set(mine))
    assert missing == []
    unaccounted = sorted(n for n in real_fams if n not in mine
                         and not n.startswith(LEFT_OUT_PREFIXES))
    assert unaccounted == [], "real names neither exposed nor listed in LEFT_OUT_PREFIXES"
    assert all(n in real_fams for n in REQUIRED_METRICS)


def test_server_info_keys(sim: SimProcess) -> None:
    """Every key the simulator sends exists in the real /server_info (the simulator's own
    extras are the documented exceptions), with the same value type where both are set."""
    real = fixture("server_info")["keys"]
    mine = httpx.get(sim.url + "/server_info", timeout=10).json()
    sim_only = {"simulated", "engine", "sim"}
    extra = sorted(k for k in mine if k not in real and k not in sim_only)
    assert extra == []
    wrong = {k: (type_name(v), real[k]) for k, v in mine.items() if k in real
             and isinstance(real[k], str) and "null" not in (type_name(v), real[k])
             and type_name(v) != real[k] and {type_name(v), real[k]} != {"int", "float"}}
    assert wrong == {}
    real_internal = real["internal_states"][0]
    internal = mine["internal_states"][0]
    extra_internal = sorted(k for k in internal if k not in real_internal
                            and k not in ("num_running_reqs", "num_queue_reqs"))
    assert extra_internal == []
    # the simulator says what it is ("0.5.23-sim"), on the version it mimics
    assert mine["version"].split("-")[0] == fixture("server_info")["scalars"]["version"]


@pytest.mark.parametrize("name,method,path", [("health", "GET", "/health"),
                                              ("health_generate", "GET", "/health_generate"),
                                              ("flush_cache_post", "POST", "/flush_cache"),
                                              ("flush_cache_get", "GET", "/flush_cache")])
def test_health_and_flush(sim: SimProcess, name: str, method: str, path: str) -> None:
    rec = fixture(name)
    r = httpx.request(method, sim.url + path, timeout=30)
    assert (r.status_code, r.text) == (rec["status"], rec["body"])
