"""The run's answer in one sentence (grid/report/answer.py), first in the terminal summary and
in report.html. The grids are built with chosen per-stream speeds, so the answer each should
give is known beforehand."""

from __future__ import annotations

import math
import re

import pandas as pd

from grid.analysis import analyse_cells, decide
from grid.analysis.decision import Crossover, Decision
from grid.analysis.verdict import recommend_threshold
from grid.report import write_report
from grid.report.answer import answer
from tests.grid.analysis.synthetic import grid, write_run


def _base(c: int) -> float:
    return 100.0 / (1 + c / 8)


# +40 % at c=1, +30 % at c=2, -10 % at c=4, -30 % at c=8: the crossover lies between 2 and 4,
# so the threshold to set is 2.
PAYS_TO_2 = {"baseline": {c: _base(c) for c in (1, 2, 4, 8)},
             "eagle3": {1: 1.4 * _base(1), 2: 1.3 * _base(2), 4: 0.9 * _base(4),
                        8: 0.7 * _base(8)}}
PCT = r"[+-]\d+ %"


def test_a_crossover_gives_the_threshold_and_the_single_stream_gain():
    cells, requests = grid(PAYS_TO_2)
    text = answer(decide(analyse_cells(cells, requests, replicates=300)), "SIMULATION")
    match = re.fullmatch(rf"eagle3 pays up to concurrency 2 on coding \(c=1 ({PCT}) \[({PCT}), "
                         rf"({PCT})\]\); above it, keep speculation off: "
                         rf"speculative_disable_above_batch=2 \(one repeat: within-run noise "
                         r"only\) \[SIMULATION\]\.", text)
    assert match, text
    point, lo, hi = (int(g.replace(" %", "")) for g in match.groups())
    assert 37 <= point <= 43 and lo < 40 < hi and lo > 0


def test_speculation_that_never_pays_says_keep_it_off():
    cells, requests = grid({"baseline": {1: 100.0, 4: 90.0}, "eagle3": {1: 80.0, 4: 60.0}})
    text = answer(decide(analyse_cells(cells, requests, replicates=300)))
    match = re.fullmatch(rf"eagle3 does not pay on coding \(c=1 ({PCT}) \[{PCT}, {PCT}\], "
                         r"slower from c=1\): keep speculation off, "
                         r"speculative_disable_above_batch=0 \(one repeat: within-run noise "
                         r"only\)\.", text)
    assert match, text
    assert -23 <= int(match.group(1).replace(" %", "")) <= -17  # 80 / 100 - 1


def test_speculation_that_always_pays_needs_no_threshold():
    cells, requests = grid({"baseline": {1: 100.0, 4: 90.0}, "eagle3": {1: 150.0, 4: 120.0}})
    text = answer(decide(analyse_cells(cells, requests, replicates=300)))
    match = re.fullmatch(rf"eagle3 pays at every tested concurrency on coding \(c=1 ({PCT}) "
                         rf"\[{PCT}, {PCT}\], up to c=4\): keep speculation on, no threshold "
                         r"needed in the tested range \(one repeat: within-run noise only\)\.",
                         text)
    assert match, text
    assert 47 <= int(match.group(1).replace(" %", "")) <= 53  # 150 / 100 - 1


def test_nothing_to_compare_is_said_plainly():
    cells, requests = grid({"baseline": {1: 100.0}})
    assert answer(decide(analyse_cells(cells, requests, replicates=50))) == (
        "no variant was compared with a baseline in this run.")


def test_the_answer_comes_first_and_validity_after_the_decision(tmp_path):
    run = tmp_path / "run"
    write_run(run, PAYS_TO_2)
    report = write_report(run)
    lines = report.summary.splitlines()
    assert lines[0].startswith("eagle3 pays up to concurrency 2 on coding (c=1 +")
    assert lines[0].endswith("speculative_disable_above_batch=2 (one repeat: within-run noise "
                             "only) [SIMULATION].")
    decision_at = next(i for i, line in enumerate(lines) if line.startswith("recommendation"))
    validity_at = next(i for i, line in enumerate(lines) if line.startswith("WARNING"))
    table_at = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    assert 0 < decision_at < validity_at < table_at
    page = report.html.read_text()
    body = page[page.index("<body>"):]
    first = re.search(r'<p class="answer">([^<]*)</p>', body)
    assert first and first.group(1) == lines[0]
    assert body.index('class="answer"') < body.index("<table") < body.index("<h2>Validity")
    assert body.index("<h2>Decision") < body.index("<h2>Validity")


def _decision(rows: list[tuple[int, float, float, float, str]], most: int = 1) -> Decision:
    """A decision over hand-made speedups of eagle3 on coding (concurrency, speedup, lo, hi,
    verdict), its recommendation made from them, `most` repeats per point."""
    table = pd.DataFrame([{"variant": "eagle3", "baseline": "baseline", "workload": "coding",
                           "load_kind": "concurrency", "load": float(c), "speedup": s, "lo": lo,
                           "hi": hi, "verdict": v, "repeats": most} for c, s, lo, hi, v in rows])
    cross = Crossover("eagle3", "coding", "concurrency", [float(r[0]) for r in rows], math.nan,
                      math.nan, math.nan)
    return Decision(table, pd.DataFrame(), [cross], [recommend_threshold(table, cross)], {},
                    repeats={"most": most})


def test_an_undetermined_lowest_load_is_never_keep_it_off():
    # c=1 +3 % [-5 %, +11 %]: half-width 8 %, 1 x (8 / 3)^2 = 7.1 -> 8 repeats; slower at c=8,
    # so the threshold is at most 4
    decision = _decision([(1, 0.03, -0.05, 0.11, "undetermined"),
                          (4, 0.01, -0.06, 0.08, "undetermined"),
                          (8, -0.2, -0.25, -0.15, "slower")])
    assert answer(decision, "SIMULATION") == (
        "eagle3 on coding: undetermined whether speculation pays (c=1 +3 % [-5 %, +11 %]: the "
        "run could not detect an effect smaller than ±8 %; about 8 repeats would resolve +3 % "
        "(an interval's half-width shrinks about as 1/sqrt(repeats))); slower from c=8, so "
        "speculative_disable_above_batch=4 at most; not evidence to turn it off (one repeat: "
        "within-run noise only) [SIMULATION].")


def test_a_real_engine_with_one_repeat_is_provisional_and_repeats_are_counted():
    rows = [(1, 0.3, 0.2, 0.4, "faster"), (8, -0.2, -0.25, -0.15, "slower")]
    assert answer(_decision(rows), None, provisional=True).endswith(
        "speculative_disable_above_batch=1 (provisional: one repeat, within-run noise only; "
        "measure again with grid.axes.repeat=[0,1,2] before acting on it).")
    assert answer(_decision(rows, most=3), None, provisional=True).endswith(
        "speculative_disable_above_batch=1 (3 repeats: intervals cover the spread between "
        "runs).")


def test_a_threshold_below_undetermined_loads_gives_its_plausible_range():
    # faster at 1 and 2, undetermined at 4 (half-width 6 %, effect 2 %, 1 repeat: 9 repeats),
    # nothing slower: set 2, plausible up to 4 or above
    decision = _decision([(1, 0.3, 0.25, 0.35, "faster"), (2, 0.2, 0.15, 0.25, "faster"),
                          (4, 0.02, -0.04, 0.08, "undetermined")])
    decision.speedups["repeats_needed"] = [None, None, 9]
    decision.speedups["half_width"] = [0.05, 0.05, 0.06]
    assert answer(decision) == (
        "eagle3 pays up to concurrency 2 on coding (c=1 +30 % [+25 %, +35 %]): "
        "speculative_disable_above_batch=2, plausible range 2 to 4 or above: undetermined at "
        "c=4, about 9 repeats would resolve +2 % (an interval's half-width shrinks about as "
        "1/sqrt(repeats)) (one repeat: within-run noise only).")
