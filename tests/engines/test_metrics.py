"""Metric families and the accept length a cell gets from each engine's counters (on a real
vLLM server's /metrics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.probe import parse_prometheus
from engines.metrics import SGLANG_METRICS, VLLM_METRICS, detect_family

FIXTURES = Path(__file__).parent / "fixtures"


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
