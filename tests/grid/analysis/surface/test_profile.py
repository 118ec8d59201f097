"""The acceptance profile: conventions, AL(k), the consistency check, pooling, the file."""

import json

import numpy as np
import pandas as pd
import pytest

from grid.analysis.surface import (
    accept_length,
    acceptance_rate,
    accepted_per_step,
    check,
    conditional_of,
    histogram_counts,
    marginal_of,
    profile_from_cells,
    profile_from_counts,
    profile_from_requests,
    profile_text,
    read_profile,
)


def test_marginal_and_conditional_convert_both_ways():
    assert marginal_of([0.8, 0.5, 0.5]) == pytest.approx((0.8, 0.4, 0.2))
    assert conditional_of([0.8, 0.4, 0.2]) == pytest.approx((0.8, 0.5, 0.5))
    # a position after one never accepted: conditional 0, same marginals
    assert conditional_of([0.5, 0.0, 0.0]) == (0.5, 0.0, 0.0)


def test_accept_length_at_each_depth():
    a = [0.8, 0.5, 0.5]
    assert accept_length(a, 0) == 1.0
    assert accept_length(a, 1) == pytest.approx(1.8)
    assert accept_length(a, 2) == pytest.approx(2.2)  # 1 + 0.8 + 0.4
    assert accept_length(a) == pytest.approx(2.4)  # + 0.2
    with pytest.raises(ValueError, match="3 position"):
        accept_length(a, 4)


def test_the_three_conventions():
    # AL 2.2 at depth 2: 1.2 accepted per step of 2 drafted
    assert accepted_per_step(2.2) == pytest.approx(1.2)
    assert acceptance_rate(2.2, 2) == pytest.approx(0.6)


def test_check_names_each_inconsistency():
    assert check((0.8, 0.5), (0.8, 0.4)) == []
    rising = check((0.5, 1.0), (0.5, 0.6))
    assert any("rises at position 2" in p for p in rising)
    assert any("outside [0, 1]" in p for p in check((1.2,), (1.2,)))
    mismatch = check((0.8, 0.6), (0.8, 0.4))
    assert mismatch == ["conditional rate at position 2 is 0.6, m_2 / m_1 is 0.5"]
    assert check((0.8,), (0.8, 0.4)) == ["1 conditional rates, 2 marginal"]


def test_pooling_is_a_ratio_of_sums_over_units_of_any_depth():
    units = pd.DataFrame({
        "domain": ["chat", "chat", "chat", "code"],
        "accepted": [[8, 4], [6, 2], [5], [5]],
        "steps": [10, 10, 10, 10]})
    prof = profile_from_counts(units, replicates=200)
    chat = prof.domains["chat"]
    # a1 = (8 + 6 + 5) / 30; a2 over the units that drafted position 2 only: (4 + 2) / (8 + 6)
    assert chat.conditional == pytest.approx((19 / 30, 6 / 14))
    assert chat.marginal == pytest.approx((19 / 30, 19 / 30 * 6 / 14))
    assert chat.samples == 3
    lo, hi = chat.conditional_interval[0]
    assert 0.5 <= lo <= 19 / 30 <= hi <= 0.8  # resampled units' a1 lie in [5/10, 8/10]
    assert np.all(np.diff(chat.replicates, axis=1) <= 0)  # marginals never rise
    code = prof.domains["code"]
    assert code.conditional == (0.5,)
    assert code.conditional_interval == ((0.5, 0.5),)  # one unit: every resample the same


def _cells():
    forced = json.dumps({"length": 3.0, "mean_length": 3.0})
    return pd.DataFrame({
        "cell_id": ["a", "b", "c", "d", "e"],
        "status": ["done", "done", "done", "done", "failed"],
        "workload": ["chat", "chat", "chat", "chat", "chat"],
        "acceptance_per_position": [[0.8, 0.4], [0.6, 0.3], [1.0, 1.0], None, [0.1, 0.0]],
        "forced_acceptance": [None, None, forced, None, None]})


def test_profile_from_cells_leaves_out_forced_failed_and_uncounted_cells():
    prof = profile_from_cells(_cells(), replicates=100)
    chat = prof.domains["chat"]
    assert prof.unit == "cells"
    assert chat.samples == 2
    # each cell one step: a1 = (0.8 + 0.6) / 2, a2 = (0.4 + 0.3) / (0.8 + 0.6)
    assert chat.conditional == pytest.approx((0.7, 0.5))
    assert chat.accept_length(2) == pytest.approx(1 + 0.7 + 0.35)


def test_profile_from_cells_without_counts_refuses():
    with pytest.raises(ValueError, match="acceptance_per_position"):
        profile_from_cells(_cells().drop(columns="acceptance_per_position"))
    with pytest.raises(ValueError, match="no done, unforced cell"):
        profile_from_cells(_cells().assign(acceptance_per_position=None))


def test_profile_file_round_trip(tmp_path):
    prof = profile_from_counts(pd.DataFrame({
        "domain": ["chat", "chat"], "accepted": [[8, 4], [6, 2]], "steps": [10, 10]}),
        replicates=50, source="run-1")
    path = tmp_path / "profile.json"
    path.write_text(profile_text(prof))
    raw = json.loads(path.read_text())
    assert raw["format"] == "specgrid.acceptance_profile/1"
    assert raw["domains"]["chat"]["accept_length"] == pytest.approx([1.7, 1.7 + 0.3])
    back = read_profile(path)
    chat, again = prof.domains["chat"], back.domains["chat"]
    assert (back.source, back.unit) == ("run-1", "requests")
    assert again.conditional == chat.conditional
    assert again.marginal == chat.marginal
    np.testing.assert_allclose(again.marginal_interval, chat.marginal_interval, atol=1e-6)
    assert again.replicates.shape == (50, 2)


def test_read_profile_refuses_another_format_and_an_inconsistent_domain(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something/1"}))
    with pytest.raises(ValueError, match="not an acceptance profile"):
        read_profile(other)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "specgrid.acceptance_profile/1", "domains": {
        "chat": {"conditional": [0.5, 0.9], "marginal": [0.5, 0.6],
                 "conditional_interval": [], "marginal_interval": []}}}))
    with pytest.raises(ValueError, match="domain chat: marginal rate rises at position 2"):
        read_profile(bad)


def test_a_histogram_gives_each_positions_accepted_count():
    # H = [2, 3, 4, 1]: of 10 verify steps, 2 accepted no draft, 3 one, 4 two, 1 all three.
    # Position 1 was accepted in the 3 + 4 + 1 steps that accepted one or more, position 2 in
    # 4 + 1, position 3 in 1.
    accepted, steps = histogram_counts([2, 3, 4, 1])
    assert (accepted, steps) == ([8, 5, 1], 10)
    # marginals 0.8, 0.5, 0.1; conditionals 0.8, 5/8, 1/5; AL(3) = 1 + 14 drafts / 10 steps
    prof = profile_from_counts(pd.DataFrame({"domain": ["d"], "accepted": [accepted],
                                             "steps": [steps]}), replicates=10)
    d = prof.domains["d"]
    assert d.marginal == pytest.approx((0.8, 0.5, 0.1))
    assert d.conditional == pytest.approx((0.8, 0.625, 0.2))
    assert [d.accept_length(k) for k in (1, 2, 3)] == pytest.approx([1.8, 2.3, 2.4])


def test_histogram_counts_to_a_given_depth():
    assert histogram_counts([5], depth=3) == ([0, 0, 0], 5)  # drafted 3, never accepted one
    assert histogram_counts([3, 2, 0, 0, 0]) == ([2, 0, 0, 0], 5)  # vLLM's dense histogram
    assert histogram_counts([3, 2, 0, 0, 0], depth=1) == ([2], 5)  # trailing zeros beyond k
    with pytest.raises(ValueError, match="a step accepted 2 drafts, more than the depth 1"):
        histogram_counts([1, 0, 2], depth=1)
    with pytest.raises(ValueError, match="a negative count"):
        histogram_counts([1, -1])


def _requests():
    return pd.DataFrame({
        "cell_id": ["a", "a", "a", "b", "f"],
        "status": ["ok", "ok", "error", "ok", "ok"],
        "domain": ["code", "code", "code", "chat", "code"],
        "workload": ["w", "w", "w", "w", "w"],
        "accept_histogram": [[2, 3, 4, 1], [5], None, [1, 1], [0, 0, 0, 9]]})


def test_profile_from_requests_counts_every_request_to_its_cells_depth():
    prof = profile_from_requests(_requests(), replicates=100)
    assert prof.unit == "requests"
    code = prof.domains["code"]
    # cell a drafts to depth 3 (its deepest accepted position): [2, 3, 4, 1] gives (8, 5, 1)
    # of 10 steps, [5] gives (0, 0, 0) of 5, so a_1 = 8 / 15, a_2 = 5 / 8, a_3 = 1 / 5; cell f's
    # request gives (9, 9, 9) of 9 steps: a_1 = 17 / 24, a_2 = 14 / 17, a_3 = 10 / 14
    assert code.samples == 3
    assert code.conditional == pytest.approx((17 / 24, 14 / 17, 10 / 14))
    assert code.accept_length(3) == pytest.approx(1 + (17 + 14 + 10) / 24)
    assert prof.domains["chat"].conditional == (0.5,)  # cell b: depth 1, 1 of 2 steps
    by_workload = profile_from_requests(_requests(), by="workload", replicates=10)
    # every request pooled, each to its own cell's depth; position 1: (8 + 0 + 1 + 9) / 26
    assert by_workload.domains["w"].conditional[0] == pytest.approx(18 / 26)


def test_profile_from_requests_with_cells_keeps_done_unforced_fixed_depth_cells():
    forced = json.dumps({"length": 3.0, "mean_length": 3.0})
    cells = pd.DataFrame({"cell_id": ["a", "b", "f"], "status": ["done", "done", "done"],
                          "forced_acceptance": [None, None, forced],
                          "speculative_disable_above_batch": [None, 8, None],
                          "speculative_depth": [None, None, None],
                          "speculative_adaptive": [False, False, False]})
    prof = profile_from_requests(_requests(), cells=cells, replicates=10)
    assert list(prof.domains) == ["code"]  # b (a threshold) and f (forced) left out
    assert prof.domains["code"].conditional == pytest.approx((8 / 15, 5 / 8, 1 / 5))
    with pytest.raises(ValueError, match="no completed request of a done, unforced"):
        profile_from_requests(_requests(), cells=cells.assign(status="failed"))
    with pytest.raises(ValueError, match="no request records accept_histogram"):
        profile_from_requests(_requests().drop(columns="accept_histogram"))
