from __future__ import annotations

from pathlib import Path

import pytest

from actors.probe import parse_prometheus
from specgrid_metrics.counters import counter_deltas

SGLANG = (Path(__file__).parent / "fixtures" / "sglang_0_5_23_metrics.txt").read_text()
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCHED = {"model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
         "moe_ep_rank": "0"}


def _by_name(samples):
    out: dict = {}
    for name, labels, value in samples:
        out.setdefault(name, []).append((labels, value))
    return out


def test_sglang_exposition_gauges_counters_and_histograms():
    got = _by_name(parse_prometheus(SGLANG))
    assert got["sglang:num_running_reqs"] == [(SCHED, 12.0)]
    assert got["sglang:token_usage"] == [(SCHED, 0.4375)]
    assert got["sglang:spec_accept_length"] == [(SCHED, 2.87)]
    tokens = {labels["is_streaming"]: v for labels, v in got["sglang:generation_tokens_total"]}
    assert tokens == {"true": 1200.0, "false": 64.0}
    assert got["sglang:spec_verify_calls_total"] == [
        ({"model_name": MODEL, "engine_type": "unified"}, 440.0)]
    # histograms: _sum and _count kept, buckets left out by default
    assert got["sglang:time_to_first_token_seconds_count"][0][1] == 5.0
    assert got["sglang:time_to_first_token_seconds_sum"][0][1] == pytest.approx(2.15)
    assert "sglang:time_to_first_token_seconds_bucket" not in got


def test_histogram_buckets_on_request():
    got = _by_name(parse_prometheus(SGLANG, buckets=True))
    buckets = {labels["le"]: v for labels, v in got["sglang:time_to_first_token_seconds_bucket"]}
    assert buckets["0.1"] == 1.0 and buckets["0.2"] == 3.0 and buckets["+Inf"] == 5.0
    assert len(buckets) == 19  # SGLang's 18 TTFT bounds + +Inf


def test_escaped_label_values_are_unescaped():
    (sample,) = parse_prometheus('m{path="/a\\"b",x="y\\\\z"} 2\n')
    assert sample == ("m", {"path": '/a"b', "x": "y\\z"}, 2.0)


def test_malformed_exposition_is_a_failed_scrape_not_a_crash():
    assert parse_prometheus("sglang:num_running_reqs{model_name=\"m\" 3\n") == []


def test_counter_deltas_sum_rises_and_survive_a_reset():
    lab = {"model_name": "m"}
    samples = [(0.0, "sglang:generation_tokens_total", lab, 100.0),
               (1.0, "sglang:generation_tokens_total", lab, 160.0),
               (2.0, "sglang:generation_tokens_total", lab, 20.0),   # server restarted
               (3.0, "sglang:generation_tokens_total", lab, 50.0),
               (0.5, "sglang:num_running_reqs", lab, 7.0),          # a gauge: no delta
               (0.0, "sglang:spec_verify_calls_total", lab, 10.0),
               (3.0, "sglang:spec_verify_calls_total", lab, 40.0)]
    deltas = counter_deltas(samples)
    key = ("sglang:generation_tokens_total", '{"model_name": "m"}')
    assert deltas[key] == 60.0 + 20.0 + 30.0
    assert deltas[("sglang:spec_verify_calls_total", '{"model_name": "m"}')] == 30.0
    assert not any(name == "sglang:num_running_reqs" for name, _ in deltas)
