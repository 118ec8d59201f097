"""The run's answer in one sentence (grid/report/answer.py), first in the terminal summary and
in report.html. The grids are built with chosen per-stream speeds, so the answer each should
give is known beforehand."""

from __future__ import annotations

import re

from grid.analysis import analyse_cells, decide
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
                         rf"speculative_disable_above_batch=2 \[SIMULATION\]\.", text)
    assert match, text
    point, lo, hi = (int(g.replace(" %", "")) for g in match.groups())
    assert 37 <= point <= 43 and lo < 40 < hi and lo > 0


def test_speculation_that_never_pays_says_keep_it_off():
    cells, requests = grid({"baseline": {1: 100.0, 4: 90.0}, "eagle3": {1: 80.0, 4: 60.0}})
    text = answer(decide(analyse_cells(cells, requests, replicates=300)))
    match = re.fullmatch(rf"eagle3 does not pay on coding \(c=1 ({PCT}) \[{PCT}, {PCT}\], "
                         r"slower from c=1\): keep speculation off, "
                         r"speculative_disable_above_batch=0\.", text)
    assert match, text
    assert -23 <= int(match.group(1).replace(" %", "")) <= -17  # 80 / 100 - 1


def test_speculation_that_always_pays_needs_no_threshold():
    cells, requests = grid({"baseline": {1: 100.0, 4: 90.0}, "eagle3": {1: 150.0, 4: 120.0}})
    text = answer(decide(analyse_cells(cells, requests, replicates=300)))
    match = re.fullmatch(rf"eagle3 pays at every tested concurrency on coding \(c=1 ({PCT}) "
                         rf"\[{PCT}, {PCT}\], up to c=4\): keep speculation on, no threshold "
                         r"needed in the tested range\.", text)
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
    assert lines[0].endswith("speculative_disable_above_batch=2 [SIMULATION].")
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
