from __future__ import annotations

from actors.probe import parse_prometheus

TEXT = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0
sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1.2e+03
sglang:time_to_first_token_seconds_bucket{model_name="m",tp_rank="0",le="0.1"} 4
sglang:time_to_first_token_seconds_sum{model_name="m",tp_rank="0"} 0.25
up 1
"""


def test_samples_with_labels_without_buckets():
    assert parse_prometheus(TEXT) == [
        ("sglang:num_running_reqs", {"model_name": "m", "tp_rank": "0"}, 3.0),
        ("sglang:generation_tokens_total", {"model_name": "m", "tp_rank": "0"}, 1200.0),
        ("sglang:time_to_first_token_seconds_sum", {"model_name": "m", "tp_rank": "0"}, 0.25),
        ("up", {}, 1.0),
    ]


def test_escaped_quotes_in_label_values():
    (sample,) = parse_prometheus('m{path="/a\\"b",x="y"} 2')
    assert sample == ("m", {"path": '/a\\"b', "x": "y"}, 2.0)
