"""grid/report/agentic.py on hand-built turn rows whose aggregates are worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from grid.report.agentic import agentic_summary, context_bin, turn_table, with_speedup


def _turn(variant, context, cached, out, ttft, e2e, verify=None, status="ok"):
    return {"variant": variant, "concurrency": 4, "status": status, "context_tokens": context,
            "cached_tokens": cached, "output_tokens": out, "ttft_s": ttft, "e2e_s": e2e,
            "spec_verify_ct": verify}


TURNS = pd.DataFrame([
    # baseline: 0-4k bin decodes 10 tokens in 1 s each round; 8-16k bin 10 tokens in 2 s
    _turn("baseline", 1000, 0, 10, 0.1, 1.1),
    _turn("baseline", 3000, 900, 10, 0.3, 1.3),
    _turn("baseline", 9000, 2900, 10, 0.2, 2.2),
    # eagle3: 0-4k decodes twice as fast (10 tokens in 0.5 s), 8-16k slower (10 tokens in 4 s)
    _turn("eagle3", 1000, 0, 10, 0.1, 0.6, verify=4),
    _turn("eagle3", 3000, 900, 10, 0.3, 0.8, verify=4),
    _turn("eagle3", 9000, 2900, 10, 0.2, 4.2, verify=5),
    _turn("eagle3", 9000, 9000, 10, 0.2, 4.2, verify=5, status="error"),  # not counted
])


def test_bins():
    assert [context_bin(t) for t in (0, 4095, 4096, 8191, 9000, 16384, 40000)] == \
        ["0-4k", "0-4k", "4-8k", "4-8k", "8-16k", "16k+", "16k+"]


def test_table_speedup_and_crossover():
    table = with_speedup(turn_table(TURNS))
    eagle = table[table.variant == "eagle3"].set_index("bin")
    assert eagle.loc["0-4k", "rounds"] == 2
    assert eagle.loc["0-4k", "accept_length"] == 20 / 8
    assert eagle.loc["8-16k", "accept_length"] == 10 / 5
    assert eagle.loc["0-4k", "stream_tok_s"] == 20 / 1.0
    assert eagle.loc["0-4k", "round_tok_s"] == 20 / 1.4
    assert eagle.loc["0-4k", "speedup"] == pytest.approx(2.4 / 1.4)  # baseline: 20 tok in 2.4 s
    assert eagle.loc["8-16k", "speedup"] == pytest.approx(2.2 / 4.2)
    assert eagle.loc["0-4k", "ttft_p50_s"] == 0.2
    assert eagle.loc["0-4k", "cache_hit_rate"] == 900 / 4000
    text = "\n".join(agentic_summary(TURNS))
    assert "eagle3 c=4: stops paying from context 8-16k (speedup 0.52x)" in text
    assert "eagle3: prefix-cache hit rate 29% over 3 rounds" in text  # 3800 / 13000


def test_no_turns_no_section():
    assert agentic_summary(TURNS.iloc[0:0]) == []


def test_cell_lines_compare_throughput_at_the_same_concurrency():
    turns = TURNS.assign(cell_id=TURNS.variant + "-c4")
    cells = pd.DataFrame([
        {"cell_id": "baseline-c4", "variant": "baseline", "concurrency": 4,
         "output_tok_s": 100.0, "ttft_p50_s": 0.2, "accept_length": None,
         "cache_hit_rate": 0.5},
        {"cell_id": "eagle3-c4", "variant": "eagle3", "concurrency": 4, "output_tok_s": 150.0,
         "ttft_p50_s": 0.25, "accept_length": 2.5, "cache_hit_rate": 0.5},
        {"cell_id": "other", "variant": "eagle3", "concurrency": 8, "output_tok_s": 1.0,
         "ttft_p50_s": 0.25, "accept_length": 2.5, "cache_hit_rate": 0.5},  # no turns
    ])
    lines = agentic_summary(turns, cells)
    eagle = [line.split() for line in lines if line.split()[:2] == ["eagle3", "4"]]
    assert eagle[0][:6] == ["eagle3", "4", "150.0", "1.50x", "250.0ms", "2.50"]
    assert not any(line.split()[:2] == ["eagle3", "8"] for line in lines)
