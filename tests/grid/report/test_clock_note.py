"""The report's word on the modelled clock (grid/report/validity.py): the scales the cells'
engines ran at, and the client's delay set against the shortest request."""

from __future__ import annotations

import json

import pandas as pd

from grid.report.validity import clock_scales, modelled_clock


def _cells(options: list[dict], engine: str = "sim") -> pd.DataFrame:
    return pd.DataFrame({"engine": engine, "engine_options": [json.dumps(o) for o in options],
                         "ttft_minus_server_p50_s": [0.004, 0.006][:len(options)],
                         "e2e_p50_s": [2.0, 4.0][:len(options)]})


def test_only_a_simulator_off_the_walls_clock_has_a_scale() -> None:
    assert clock_scales(_cells([{"time_scale": 0.5}, {"time_scale": None}])) == [0.5]
    assert clock_scales(_cells([{"time_scale": 0}])) == []  # no step cost: the wall's clock
    assert clock_scales(_cells([{}], engine="vllm")) == []


def test_the_clients_delay_is_set_against_the_shortest_request() -> None:
    # median delay (4 + 6) / 2 = 5 ms against the shortest e2e p50, 2 s: 0.25 %, printed "0.2%"
    note = modelled_clock(_cells([{"time_scale": 0.5}, {"time_scale": 0.5}]))
    assert "time_scale 0.5" in note and "0.2% of the shortest request (e2e p50 2000 ms)" in note
    assert modelled_clock(_cells([{}, {}])) == ""  # the wall's clock: nothing to say
