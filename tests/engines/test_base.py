"""The engine interface's pure parts: finding engines by folder, metric families, and the accept
length a cell gets from each engine's counters (on a real vLLM server's /metrics)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import engines
from actors.probe import parse_prometheus
from engines.base import SGLANG_METRICS, VLLM_METRICS, detect_family

FIXTURES = Path(__file__).parent / "fixtures"


def test_engines_are_found_by_folder_and_an_unknown_one_is_named() -> None:
    assert engines.names() == ("external", "sglang", "sim", "vllm")
    assert engines.get("vllm").label == "vLLM" and engines.get("sim").simulated
    assert not engines.get("external").launches
    with pytest.raises(ValueError, match="no engine 'tgi': the engines are external, sglang"):
        engines.get("tgi")


def test_gpus_per_server_by_engine_and_device() -> None:
    assert engines.get("vllm").gpus(4, "cuda") == 4
    assert engines.get("vllm").gpus(4, "cpu") == 0  # a CPU server reserves no GPU
    assert engines.get("sglang").gpus(2, "cpu") == 0
    assert engines.get("external").gpus(8, "cuda") == 0
    assert engines.get("sim").gpus(2, "cpu") == 2  # logical GPUs, so groups pack as on a node


def _scrapes(text: str) -> list[tuple[float, str, dict[str, str], float]]:
    """The capture as the cell's last scrape, after a first one where every counter was 0 (the
    server had just started)."""
    after = [(2.0, name, labels, value) for name, labels, value in parse_prometheus(text)]
    return [(1.0, name, labels, 0.0) for _, name, labels, _ in after] + after


def test_vllm_accept_length_from_a_real_servers_counters() -> None:
    # vLLM 0.32.0, draft_model k=4, 32 greedy requests of 64 tokens: 788 drafts, 1273
    # accepted draft tokens, 2048 generated tokens; accepted by position 433/325/267/248
    # (read off the capture; vLLM's own log said "Mean acceptance length: 2.62").
    samples = _scrapes((FIXTURES / "vllm-0.32.0-metrics-draft-near.txt").read_text())
    got = VLLM_METRICS.accept_length(samples)
    assert got["accept_length_source"] == "server_metrics"
    assert got["accept_length_decode"] == pytest.approx(1 + 1273 / 788)
    assert got["accept_length_decode"] == pytest.approx(2.62, abs=0.005)
    assert got["accept_length"] == pytest.approx(2048 / 788)
    assert got["acceptance_per_position"] == pytest.approx(
        [433 / 788, 325 / 788, 267 / 788, 248 / 788])


def test_no_drafts_means_no_accept_length() -> None:
    text = (FIXTURES / "vllm-0.32.0-metrics-draft-near.txt").read_text()
    samples = [s for s in _scrapes(text) if "spec_decode" not in s[1]]
    assert VLLM_METRICS.accept_length(samples)["accept_length_source"] is None
    assert SGLANG_METRICS.accept_length(_scrapes(text))["accept_length"] is None  # not its names


def test_metric_family_is_told_from_the_names() -> None:
    assert detect_family(["process_cpu_seconds_total", "vllm:num_requests_running"]) \
        is VLLM_METRICS
    assert detect_family(["sglang:num_running_reqs"]) is SGLANG_METRICS
    assert detect_family(["tgi_queue_size", "python_gc_objects_collected_total"]) is None


def test_threshold_values_per_engine() -> None:
    eagle3 = {"name": "eagle3", "args": {"max_running_requests": 64,
                                         "speculative_algorithm": "EAGLE3",
                                         "speculative_num_steps": 3,
                                         "speculative_eagle_topk": 1}}
    baseline = {"name": "baseline", "args": {"max_running_requests": 64}}
    captured = [*range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60]
    # The simulator routes as SGLang; the H200 profile's 131 GiB gives SGLang's max_bs 256,
    # lowered to the cap of 64. SGLang itself does not know the GPU here: 160, lowered too.
    assert engines.get("sim").threshold_values(eagle3, "h200") == captured
    assert engines.get("sglang").threshold_values(eagle3) == captured
    # vLLM looks the draft count up by the number of scheduled requests: every batch size.
    assert engines.get("vllm").threshold_values(eagle3) == list(range(1, 64))
    assert engines.get("external").threshold_values(eagle3) is None
    for name in ("sim", "sglang", "vllm"):
        assert engines.get(name).threshold_values(baseline) is None, name


def test_a_depth_schedule_is_checked_once_for_every_engine() -> None:
    from engines.depth import depth_schedule

    assert depth_schedule([[1, 5], [9, 3], [33, 1], [65, 0]]) == (
        (1, 5), (9, 3), (33, 1), (65, 0))
    assert depth_schedule(((1, 3),)) == ((1, 3),)  # one tier: a fixed depth
    for bad, words in [
        ([], "non-empty list of [from batch size, depth] pairs"),
        ([[1, 5, 2]], "pairs of ints"),
        ([[1, "5"]], "pairs of ints"),
        ([[1, True]], "pairs of ints"),
        ("1,5", "pairs of ints"),
        ([[2, 5], [9, 3]], "must start from batch size 1, got 2"),
        ([[1, 5], [9, 3], [9, 1]], "ascending by batch size: 9 follows 9"),
        ([[1, 5], [9, 3], [5, 1]], "ascending by batch size: 5 follows 9"),
        ([[1, 5], [9, -1]], "depths must be >= 0 (0 = no drafting), got -1"),
        ([[1, 0], [9, 0]], "drafts at no batch size"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            depth_schedule(bad)
