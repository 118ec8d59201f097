"""What a server someone else runs offers, decided from its answers (engines/detect.py):
the answers as a real vLLM 0.32.0 and a real SGLang 0.5.23 gave them (docs/engines.md)."""

from __future__ import annotations

from engines.detect import decide

VLLM_NAMES = ["vllm:num_requests_running", "vllm:generation_tokens_total"]
SGLANG_NAMES = ["sglang:num_running_reqs", "sglang:generation_tokens_total"]


def test_a_plain_vllm_server_has_no_flush_and_no_server_info() -> None:
    # without VLLM_SERVER_DEV_MODE both flush candidates and both info paths answer 404
    offers = decide(VLLM_NAMES, {"/flush_cache": 404, "/reset_prefix_cache": 404},
                    {"/server_info": 404, "/get_server_info": 404}, "0.32.0")
    assert offers.family == "vllm" and offers.version == "0.32.0"
    assert offers.flush_cache is None and offers.server_info is None
    assert not offers.native_generate
    assert [n.split(" (")[0].split(":")[0] for n in offers.notes] == [
        "no cache-flush endpoint", "no server-info endpoint"]


def test_vllm_in_dev_mode_flushes_with_reset_prefix_cache() -> None:
    offers = decide(VLLM_NAMES, {"/flush_cache": 404, "/reset_prefix_cache": 200},
                    {"/server_info": 200})
    assert offers.flush_cache == "/reset_prefix_cache" and offers.server_info == "/server_info"
    assert offers.notes == []


def test_sglang_flushes_with_its_own_endpoint_and_serves_generate() -> None:
    # a 400 (requests still running) is an endpoint that exists: used, retried per cell
    offers = decide(SGLANG_NAMES, {"/flush_cache": 400}, {"/server_info": 200})
    assert offers.flush_cache == "/flush_cache" and offers.native_generate
    assert offers.family == "sglang"


def test_a_server_without_known_metrics_is_said_so() -> None:
    offers = decide(["tgi_queue_size"], {"/flush_cache": 405, "/reset_prefix_cache": 404}, {})
    assert offers.family is None and not offers.native_generate
    assert any("no sglang: or vllm: series" in n for n in offers.notes)
    assert offers.as_dict()["flush_cache"] is None


def test_native_generate_is_known_from_metrics_or_models_else_unknown() -> None:
    none = {"/flush_cache": 200}
    assert decide([], none, {}, owner="sglang").native_generate is True  # no /metrics
    assert decide([], none, {}, owner="vllm").native_generate is False
    assert decide(["tgi_queue_size"], none, {}).native_generate is None  # not known: tried
