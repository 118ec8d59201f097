"""Start-up per variant from cell rows (grid/analysis/startup.py): a start is one server_key x
server_started_at; the cells a server served share it."""

from __future__ import annotations

import json

import pandas as pd

from grid.analysis.startup import startup_table


def cell(variant: str, key: str, started: float | None, seconds: float | None,
         phases: dict[str, float] | None = None) -> dict:
    return {"variant": variant, "server_key": key, "server_started_at": started,
            "server_startup_s": seconds, "source": "real engine, CPU, tiny model",
            "server_startup_phases": json.dumps(phases) if phases else None}


def test_starts_are_counted_once_and_summarised_per_variant():
    cells = pd.DataFrame([
        # one vLLM draft-model server served two cells, then died and was started again
        cell("draft", "k1", 100.0, 60.0, {"load_weights": 2.0, "init_engine": 30.0}),
        cell("draft", "k1", 100.0, 60.0, {"load_weights": 2.0, "init_engine": 30.0}),
        cell("draft", "k1", 500.0, 50.0, {"load_weights": 1.0, "init_engine": 20.0}),
        # a baseline whose log gave no phases, and a server someone else runs (no start)
        cell("baseline", "k2", 50.0, 45.0),
        cell("external", "k3", None, None),
    ])
    t = startup_table(cells).set_index("variant")
    assert set(t.index) == {"baseline", "draft"}
    assert t.loc["draft", "starts"] == 2
    assert (t.loc["draft", "startup_s"], t.loc["draft", "startup_s_min"],
            t.loc["draft", "startup_s_max"]) == (55.0, 50.0, 60.0)
    assert t.loc["draft", "phases"] == {"load_weights": 1.5, "init_engine": 25.0}
    assert t.loc["baseline", "starts"] == 1 and t.loc["baseline", "phases"] == {}


def test_runs_without_start_columns_give_an_empty_table():
    assert startup_table(pd.DataFrame([{"variant": "baseline", "server_key": "k"}])).empty
