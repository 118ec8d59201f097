from __future__ import annotations

import pandas as pd
import pytest

from grid.loader import load_cells, load_requests, load_telemetry, sql
from grid.store.results import write_cell
from tests.grid.analysis.synthetic import write_run

SPEEDS = {"baseline": {1: 90.0, 4: 80.0}, "eagle3": {1: 120.0, 4: 70.0}}


@pytest.fixture
def runs(tmp_path):
    a, b = tmp_path / "run-a", tmp_path / "run-b"
    write_run(a, SPEEDS, per_stream=4)
    write_run(b, {"baseline": {1: 95.0}}, per_stream=4)
    return a, b


def test_filters_and_columns_are_pushed_down(runs):
    a, _ = runs
    got = load_requests(a, columns=["cell_id", "variant", "concurrency"],
                        filters=[("variant", "=", "eagle3"), ("concurrency", ">=", 4)])
    assert list(got.columns) == ["cell_id", "variant", "concurrency"]
    assert set(got.cell_id) == {"eagle3-c4"} and len(got) == 16


def test_sql_views_over_several_runs(runs):
    a, b = runs
    con = sql(a, b)
    per_run = dict(con.sql("SELECT run_id, count(*) FROM cells GROUP BY run_id").fetchall())
    assert per_run == {"run-a": 4, "run-b": 1}
    rows = con.sql("SELECT count(*) FROM requests WHERE variant = 'baseline'").fetchall()[0]
    assert rows == (4 + 16 + 4,)
    # empty datasets are still views with the documented columns
    assert con.sql("SELECT count(*) FROM telemetry").fetchall() == [(0,)]
    assert "power_w" not in con.sql("SELECT * FROM telemetry").df().columns
    assert {"metric", "value", "gpu", "node"} <= set(con.sql("SELECT * FROM telemetry").df())


def test_cells_view_keeps_the_latest_attempt(runs):
    a, _ = runs
    row = load_cells(a, attempts="all")
    first = {k: (None if pd.isna(v) else v) for k, v in
             row[row.cell_id == "baseline-c1"].iloc[0].to_dict().items()}
    first.update(attempt=2, status="failed", error="server exited")
    for k in ("variant", "workload"):
        first.pop(k)
    write_cell(a, variant="baseline", workload="coding", cell_id="baseline-c1", attempt=2,
               requests=[], cell_row=first)
    con = sql(a)
    assert con.sql("SELECT attempt, status FROM cells WHERE cell_id = 'baseline-c1'"
                   ).fetchall() == [(2, "failed")]
    assert con.sql("SELECT count(*) FROM cells").fetchall() == [(4,)]


def test_telemetry_roundtrip(tmp_path):
    a = tmp_path / "run-a"
    write_run(a, SPEEDS, per_stream=4, telemetry={"baseline-c1": [
        {"run_id": "run-a", "cell_id": "baseline-c1", "attempt": 1, "node": "n1", "gpu": 0,
         "sampled_at": 1.0, "metric": "power_w", "value": 300.0, "note": None}]})
    tel = load_telemetry(a)
    assert tel[["cell_id", "metric", "value"]].values.tolist() == [
        ["baseline-c1", "power_w", 300.0]]
    assert sql(a).sql("SELECT sum(value) FROM telemetry").fetchall() == [(300.0,)]


def test_sql_needs_a_run():
    with pytest.raises(ValueError):
        sql()


def test_turns_roundtrip_with_the_attempt(tmp_path):
    from grid.loader import load_turns

    def turn(k, cached, attempt):
        return {"run_id": "r", "cell_id": "c1", "attempt": attempt, "conversation_id": "conv-1",
                "turn_index": k, "num_turns": 2, "status": "ok", "context_tokens": 1000 + k,
                "cached_tokens": cached, "itl_s": [0.01, 0.02], "ttft_s": 0.1}

    for attempt in (1, 2):
        write_cell(tmp_path, variant="eagle3", workload="agentic", cell_id="c1", attempt=attempt,
                   requests=[], cell_row={"run_id": "r", "cell_id": "c1", "attempt": attempt,
                                          "status": "done"},
                   turns=[turn(0, 0, attempt), turn(1, 960, attempt)])
    turns = load_turns(tmp_path)  # the latest committed attempt only
    assert turns[["attempt", "turn_index", "cached_tokens", "variant"]].values.tolist() == [
        [2, 0, 0, "eagle3"], [2, 1, 960, "eagle3"]]
    assert turns.itl_s.map(list).tolist() == [[0.01, 0.02], [0.01, 0.02]]
    assert len(load_turns(tmp_path, attempts="all")) == 4
    assert sql(tmp_path).sql("SELECT sum(cached_tokens) FROM turns").fetchall() == [(960,)]
    # turns without their cell row (an uncommitted attempt) are never read
    (tmp_path / "cells" / "variant=eagle3" / "workload=agentic" / "c1.a2.parquet").unlink()
    assert load_turns(tmp_path).attempt.tolist() == [1, 1]


def test_a_run_without_conversations_has_an_empty_turns_view(runs):
    a, _ = runs
    assert sql(a).sql("SELECT count(*) FROM turns").fetchall() == [(0,)]
