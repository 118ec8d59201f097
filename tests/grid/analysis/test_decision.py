from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grid.analysis import analyse_cells, decide
from grid.analysis.decision import NO_DIFFERENCE, Decision, crossovers
from tests.grid.analysis.synthetic import grid

LEVELS = (1, 2, 4, 8, 16)
SPEEDUP = {1: 0.4, 2: 0.3, 4: 0.1, 8: -0.1, 16: -0.3}


def _base(c: int) -> float:
    return 100.0 / (1 + c / 8)


def test_known_speedups_give_the_known_crossover_and_threshold():
    cells, requests = grid({
        "baseline": {c: _base(c) for c in LEVELS},
        "eagle3": {c: _base(c) * (1 + SPEEDUP[c]) for c in LEVELS}})
    decision = decide(analyse_cells(cells, requests, replicates=500))
    table = decision.speedups.set_index("load")
    for c in LEVELS:
        assert table.speedup[c] == pytest.approx(SPEEDUP[c], abs=0.03)
        assert table.lo[c] < SPEEDUP[c] + 0.01 and table.hi[c] > SPEEDUP[c] - 0.01
    assert table.verdict.tolist() == ["faster"] * 3 + ["slower"] * 2
    (cross,) = decision.crossovers
    assert cross.point == pytest.approx(2 ** 2.5, rel=0.1)
    assert 4 < cross.lo <= cross.point <= cross.hi < 8
    (rec,) = decision.recommendations
    assert rec["speculative_disable_above_batch"] == 4
    assert rec["plausible_range"] == [4, 4]
    lines = "\n".join(decision.lines())
    assert "eagle3 beats baseline at c=1" in lines and "eagle3 loses to baseline at c=16" in lines


def test_noise_without_a_real_difference_is_undetermined_never_off():
    same = {c: _base(c) for c in (1, 4, 16)}
    cells, requests = grid({"baseline": same, "eagle3": same}, jitter=0.3, per_stream=4)
    decision = decide(analyse_cells(cells, requests, replicates=500))
    assert set(decision.speedups.verdict) == {"undetermined"}
    assert (decision.speedups.half_width > 0).all()
    (rec,) = decision.recommendations
    assert rec["verdict"] == "undetermined"
    assert rec["speculative_disable_above_batch"] is None
    assert rec["statement"].startswith("undetermined: speculation is not significantly faster")
    lines = "\n".join(decision.lines())
    assert "undetermined (95% interval holds zero: not evidence of no difference;" in lines
    assert "significant (95% interval" not in lines


def test_speculation_that_always_pays_needs_no_threshold():
    cells, requests = grid({"baseline": {c: _base(c) for c in (1, 8)},
                            "eagle3": {c: 1.5 * _base(c) for c in (1, 8)}})
    (rec,) = decide(analyse_cells(cells, requests, replicates=300)).recommendations
    assert rec["speculative_disable_above_batch"] is None
    assert "every tested concurrency" in rec["statement"]


def test_threshold_winner_per_load_and_overall_with_margin():
    speeds = {
        "baseline": {c: _base(c) for c in (1, 16)},
        "eagle3": {1: 1.3 * _base(1), 16: 0.7 * _base(16)},
        "eagle3__off_above-4": {1: 1.3 * _base(1), 16: 1.0 * _base(16)},
        "eagle3__off_above-32": {1: 1.3 * _base(1), 16: 0.7 * _base(16)},
    }
    cells, requests = grid(speeds, jitter=0.01)
    result = decide(analyse_cells(cells, requests, replicates=300)).thresholds
    by_load = {(w["metric"], w["load"]): w for w in result["per_load"]}
    # at c=1 three variants run at the same speed: no significant difference among the top
    assert by_load[("output_tok_s", 1.0)]["verdict"] == NO_DIFFERENCE
    # at c=16 the threshold variant equals the baseline, and beats the always-on ones by
    # nothing significant over the baseline -> the winner is one of those two
    assert by_load[("output_tok_s", 16.0)]["winner"] in {"baseline", "eagle3__off_above-4"}
    overall = {w["metric"]: w for w in result["overall"]}["output_tok_s"]
    assert overall["winner"] == "eagle3__off_above-4"
    assert overall["significant"] and overall["margin"] > 0.05


def test_the_significance_list_is_held_over_its_comparisons_and_dropped_replicates_counted():
    # two comparisons whose intervals lie above zero; Holm keeps the first (p = 0.002 <= 0.05
    # / 2) and then the second only if p <= 0.05 / 1: at p = 0.06 (its percentile interval
    # just above zero, its tail count not) it is kept apart
    rows = [{"variant": "eagle3", "baseline": "baseline", "workload": "coding",
             "load_kind": "concurrency", "load": c, "speedup": s, "lo": lo, "hi": hi,
             "verdict": "faster", "repeats": 1, "p": p, "holm": keep, "dropped": n}
            for c, s, lo, hi, p, keep, n in [(1.0, 0.2, 0.1, 0.3, 0.002, True, 0),
                                             (8.0, 0.05, 0.001, 0.1, 0.06, False, 3)]]
    lines = Decision(pd.DataFrame(rows), pd.DataFrame(), [], [], {}).lines()
    assert lines[0] == ("eagle3 vs baseline on coding: c=1 +20% [+10%, +30%], c=8 +5% [+0%, "
                        "+10%] (3 replicates not finite, left out)")
    assert lines[1] == ("significant (95% interval excludes zero; Holm's step-down over the 2 "
                        "comparisons keeps it): eagle3 beats baseline at c=1 by +20% [+10%, "
                        "+30%]")
    assert lines[2] == ("significant alone, not over the comparisons (Holm's step-down over the "
                        "2 comparisons): eagle3 beats baseline at c=8 by +5% [+0%, +10%]")


def test_a_replicate_with_a_non_finite_level_is_left_out_of_the_crossovers_interval():
    # two levels, c=1 and c=4; replicate 0 crosses at c=2 (+10 % then -10 %: the midpoint in
    # log2), replicate 1 at c=2 too, replicate 2 has an infinite level (a zero baseline
    # replicate): it is left out, not a nan interval
    table = pd.DataFrame([
        {"variant": "eagle3", "workload": "coding", "load_kind": "concurrency", "load": 1.0,
         "speedup": 0.1, "_reps": np.array([0.1, 0.1, np.inf])},
        {"variant": "eagle3", "workload": "coding", "load_kind": "concurrency", "load": 4.0,
         "speedup": -0.1, "_reps": np.array([-0.1, -0.1, -0.1])}])
    (cross,) = crossovers(table)
    assert cross.point == pytest.approx(2.0)
    assert (cross.lo, cross.hi) == (pytest.approx(2.0), pytest.approx(2.0))
