"""A capacity search's trace in the report (grid/questions/capacity/__init__.py), on traces built
from hand-chosen attainments on the lattice 1 2 4 8 16 32 64 (the steps: test_steps.py)."""

from __future__ import annotations

from grid.analysis.capacity import Attainment
from grid.questions.capacity import answer_sentence, trace_lines
from grid.questions.capacity.steps import replay, result

LATTICE = (1, 2, 4, 8, 16, 32, 64)


def _trace(att: dict[int, Attainment], max_cells: int = 7) -> dict:
    steps = replay(LATTICE, att, max_cells, 0.9)
    return {"kind": "capacity", "variant": "eagle3", "workload": "coding", "target": 0.9,
            "result": {**result(steps, att, LATTICE, 0.9), "max_cells": max_cells,
                       "note": None},
            "steps": [s.as_json() for s in steps]}


def test_undecided_loads_and_the_unmeasured_are_said():
    # 1 meets (40 of 40), 8 undecided at 10 of 10, 16 undecided at 0 of 1, 64 misses (0 of
    # 40): capacity 8, interval c=1 .. c=32 (below the miss at 64), 2 4 32 not measured
    trace = _trace({1: Attainment(40, 40), 8: Attainment(10, 10), 16: Attainment(0, 1),
                    64: Attainment(0, 40)})
    lines = trace_lines(trace)
    assert lines[0] == ("search: capacity of eagle3 on coding (SLO attainment >= 90%), 4 of 7 "
                        "cells (the dense grid: 7), lattice 1..64")
    # intervals: 0.025 ** (1/40) = 0.912 -> 91 %; 0.025 ** (1/10) = 0.692 -> 69 %; 0 of 1:
    # top 0.975 -> 98 %; 0 of 40: top 1 - 0.912 = 0.088 -> 9 %
    assert lines[-2] == ("  attainment (95 % interval, steady-window requests): c=1 100% "
                         "[91%, 100%] of 40 meets; c=8 100% [69%, 100%] of 10 undecided; "
                         "c=16 0% [0%, 98%] of 1 undecided; c=64 0% [0%, 9%] of 40 misses")
    # c=8 holds by its point estimate (10 of 10) but is undecided: said, not claimed
    assert trace["result"]["point_estimate"] is True
    found = ("serves up to c=8 within the SLOs by its point estimate alone (c=8 is undecided; "
             "shown to meet them up to c=1) (interval c=1 .. c=32, undecided at c=8, c=16, "
             "3 of its loads not measured; c=64 misses them)")
    assert lines[-1] == f"  stopped: bracketed; eagle3 {found}"
    assert answer_sentence(trace) == (f"eagle3 on coding {found} (the capacity search, 4 of 7 "
                                      "cells, one repeat per load: within-run noise only)")


def test_a_cliff_is_named_with_the_next_loads_attainment():
    # 8 meets, 16 misses with none of 6 (top 0.459 < 0.5): interval c=8 .. c=8, a cliff
    trace = _trace({1: Attainment(40, 40), 8: Attainment(40, 40), 16: Attainment(0, 6),
                    64: Attainment(0, 40)})
    assert trace_lines(trace)[-1] == (
        "  stopped: bracketed; eagle3 serves up to c=8 within the SLOs (interval c=8 .. c=8; "
        "c=16 misses them); a cliff: c=16 serves 0% of requests within the SLOs")


def test_no_answer_until_it_stops_and_the_budget_says_what_it_has():
    waiting = _trace({1: Attainment(40, 40), 64: Attainment(0, 40)})
    assert answer_sentence(waiting) is None
    assert trace_lines(waiting)[-1] == "  not finished: the last step is still to run"
    spent = _trace({1: Attainment(40, 40), 8: Attainment(40, 40), 64: Attainment(0, 40)},
                   max_cells=3)
    assert trace_lines(spent)[-1] == (
        "  stopped: budget; so far eagle3 serves up to c=8 within the SLOs (interval c=8 .. "
        "c=32, 2 of its loads not measured; c=64 misses them)")
    # the budget ran out with the boundary unbracketed: not a plain answer
    assert spent["result"]["point_estimate"] is False  # c=8 meets (40 of 40)
    assert answer_sentence(spent) == (
        "eagle3 on coding has an undetermined capacity: grid.search.max_cells=3 ran out before "
        "the boundary was bracketed (a larger one continues the search); so far it serves up "
        "to c=8 within the SLOs (interval c=8 .. c=32, 2 of its loads not measured; c=64 "
        "misses them) (the capacity search, 3 of 7 cells, one repeat per load: within-run "
        "noise only)")


def test_a_capacity_no_load_is_shown_to_meet_is_undetermined():
    # 10 of 10 up to c=16 (each interval's low end 0.025 ** (1 / 10) = 0.69: undecided, but
    # its point estimate holds), 0 of 40 from c=32 (misses): the search brackets c=16 .. c=32
    # by point estimates, and no load is shown to meet the SLOs: undetermined, not "c=16"
    few, none = Attainment(10, 10), Attainment(0, 40)
    trace = _trace({1: few, 2: few, 4: few, 8: few, 16: few, 32: none, 64: none})
    assert trace["result"]["undetermined"] is True and trace["result"]["interval"][0] is None
    assert answer_sentence(trace).startswith(
        "eagle3 on coding has an undetermined capacity: no load searched is shown to meet the "
        "SLOs (their point estimates hold up to c=16) (interval none .. c=16, undecided at ")
