"""Acceptance against alignment (grid/analysis/lesson.py) on hand-worked requests."""

from __future__ import annotations

import pandas as pd
import pytest

from grid.analysis.lesson import acceptance_table, relation_lines, relations


def _cells(alignments: dict[str, float], temperature: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame([{"cell_id": f"{w}-{temperature}", "status": "done", "variant": "draft",
                          "workload": w, "concurrency": 4, "temperature": temperature,
                          "alignment": a, "alignment_ok": a >= 0.6,
                          "source": "real engine, CPU, tiny trained models"}
                         for w, a in alignments.items()])


def _requests(per_workload: dict[str, list[tuple[int, int]]], temperature: float = 0.0
              ) -> pd.DataFrame:
    rows = []
    for w, reqs in per_workload.items():
        for out, steps in reqs:
            rows.append({"cell_id": f"{w}-{temperature}", "status": "ok", "output_tokens": out,
                         "spec_verify_ct": steps, "domain": w})
    return pd.DataFrame(rows)


def test_accept_length_is_decode_tokens_over_verify_steps_with_an_interval():
    # coding: (11-1 + 21-1) / (5 + 10) = 30 / 15 = 2.0; each request is 2.0 too, so every
    # bootstrap replicate is 2.0 and the interval is the point.
    # chat: (9-1)/8 = 1.0 and (17-1)/4 = 4.0 -> (8 + 16) / (8 + 4) = 2.0 overall, and the
    # replicates range over {1.0, 2.0, 4.0}: the interval spans [1, 4] at most.
    table = acceptance_table(_requests({"coding": [(11, 5), (21, 10)],
                                        "chat": [(9, 8), (17, 4)]}),
                             _cells({"coding": 0.3, "chat": 0.05}), replicates=400)
    by = table.set_index("workload")
    assert by.loc["coding", "accept_length"] == pytest.approx(2.0)
    assert (by.loc["coding", "lo"], by.loc["coding", "hi"]) == pytest.approx((2.0, 2.0))
    assert by.loc["chat", "accept_length"] == pytest.approx(2.0)
    assert 1.0 <= by.loc["chat", "lo"] < 2.0 < by.loc["chat", "hi"] <= 4.0
    assert by.loc["coding", "requests"] == 2 and by.loc["chat", "alignment"] == 0.05


def test_requests_without_verify_steps_and_failed_ones_are_left_out():
    req = _requests({"coding": [(11, 5)]})
    extra = pd.DataFrame([{"cell_id": "coding-0.0", "status": "error", "output_tokens": 50,
                           "spec_verify_ct": 1, "domain": "coding"},
                          {"cell_id": "coding-0.0", "status": "ok", "output_tokens": 50,
                           "spec_verify_ct": None, "domain": "coding"}])
    table = acceptance_table(pd.concat([req, extra]), _cells({"coding": 0.3}))
    assert table.requests.tolist() == [1] and table.accept_length.tolist() == [2.0]


def test_rank_correlation_and_the_gap_between_the_extremes():
    # alignments 0.30 > 0.20 > 0.02 with accept lengths 2.0 > 1.5 > 1.0: ranks agree, rho = +1;
    # every request of a workload has the same ratio, so each interval is its point: apart.
    table = acceptance_table(_requests({"coding": [(21, 10)] * 3, "agentic": [(16, 10)] * 3,
                                        "encyclopedic": [(11, 10)] * 3}),
                             _cells({"coding": 0.30, "agentic": 0.20, "encyclopedic": 0.02}))
    (rel,) = relations(table)
    assert rel["spearman"] == pytest.approx(1.0)
    assert rel["workloads"] == 3 and rel["requests"] == 9
    assert rel["most_aligned"]["workload"] == "coding"
    assert rel["least_aligned"]["workload"] == "encyclopedic" and rel["apart"] is True
    (line,) = relation_lines(table)
    assert "Spearman rho +1.00" in line and "intervals apart" in line
    # reversed acceptance: rho = -1
    reverse = acceptance_table(_requests({"coding": [(11, 10)], "agentic": [(16, 10)],
                                          "encyclopedic": [(21, 10)]}),
                               _cells({"coding": 0.30, "agentic": 0.20, "encyclopedic": 0.02}))
    assert relations(reverse)[0]["spearman"] == pytest.approx(-1.0)


def test_two_workloads_give_no_correlation_and_overlap_is_said():
    table = acceptance_table(_requests({"coding": [(9, 8), (17, 4)], "chat": [(9, 8), (17, 4)]}),
                             _cells({"coding": 0.3, "chat": 0.1}), replicates=200)
    (rel,) = relations(table)
    assert rel["spearman"] is None and rel["apart"] is False
    assert "undefined" in relation_lines(table)[0] and "overlap" in relation_lines(table)[0]


def test_temperatures_are_separate_series():
    cells = pd.concat([_cells({"coding": 0.3, "chat": 0.1, "math": 0.05}, t) for t in (0.0, 0.7)])
    req = pd.concat([_requests({"coding": [(21, 10)], "chat": [(16, 10)], "math": [(11, 10)]},
                               0.0),
                     _requests({"coding": [(16, 10)], "chat": [(13, 10)], "math": [(11, 10)]},
                               0.7)])
    rels = {r["temperature"]: r for r in relations(acceptance_table(req, cells))}
    assert set(rels) == {0.0, 0.7}
    assert rels[0.0]["most_aligned"]["accept_length"] == pytest.approx(2.0)
    assert rels[0.7]["most_aligned"]["accept_length"] == pytest.approx(1.5)
