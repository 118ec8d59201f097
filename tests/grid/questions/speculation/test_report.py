"""A surface search's trace in the report: the answer, the lines, decision.json's entry and the
settings written beside the report, on a hand-made trace."""

import json

from grid.questions.speculation.read import rate_index
from grid.questions.speculation.report import (
    answer_sentence,
    surface_decision,
    trace_lines,
    trace_section,
    write_surface_files,
)


def row(b, k, cost, measured=True):
    return {"load": b, "depth": k, "cost": cost, "interval": [cost - 0.1, cost + 0.1],
            "measured": measured}


SETTING = {"engine": "sim", "flags": ["--x", "a.json"], "command": "--x a.json",
           "files": {"a.json": "{}\n"}, "tiers": [[1, None, 2]]}
TRACE = {
    "kind": "speculation", "baseline": "baseline", "variant": "eagle3", "workload": "coding",
    "lattice": [1, 64], "depths": [1, 2], "rates": [0.5, 0.9],
    "steps": [{"number": 1, "why": "coarse", "points": [[1, 0, 0], [1, 1, 0], [1, 2, 0],
                                                         [1, 2, 1]], "stop": None},
              {"number": 2, "why": "all 0 checks agree", "points": [], "stop": "fits"}],
    "result": {
        "stop": "fits", "stop_meaning": "every cell agrees", "cells": 4, "starts": 4,
        "dense_cells": 10, "dense_starts": 5, "design": {"loads": [1, 64], "depths": [1, 2]},
        "checks": [],
        "table": [row(1, 1, 1.5), row(1, 2, 2.0), row(64, 1, 3.0, False), row(64, 2, 4.0)],
        "decomposition": {"1": {"fixed": 0.0, "fixed_interval": [-0.1, 0.1], "draft": 0.5,
                                "draft_interval": [0.4, 0.6],
                                "verify_excess": {"1": 0.0, "2": 0.0}}, "64": None},
        "leviathan": {"load": 1, "acceptance": 0.8, "assumed": True,
                      "rows": [{"depth": 1, "accept_length": 1.8, "surface": 1.2,
                                "leviathan": 1.2}]},
        "length_checks": [{"load": 1, "depth": 2, "lengths": [2.0, 2.8], "difference": 0.3,
                           "interval": [0.2, 0.4], "agrees": False}],
        "prediction": {"source": "hand", "unit": "requests", "domains": {"coding/x": {
            "samples": 10, "accept_length": [1.8, 2.4],
            "cells": [{"load": 1, "depth": 2, "speedup": 1.2, "interval": [1.1, 1.3]}],
            "best": {"1": 2, "64": 0}, "schedule": [[1, 2], [64, 0]],
            "text": "schedule 2 from 1, 0 from 64",
            "settings": {"sim": SETTING, "vllm": {"engine": "vllm", "refused": "no"}}}}}}}


def test_the_answer_gives_the_span_the_budget_and_the_schedule():
    text = answer_sentence(TRACE)
    # costs 1.5 .. 4.0 (the interpolated cell counts too), 4 cells / 4 starts against 10 / 5
    assert "costs 1.50 to 4.00 decode steps" in text
    assert "4 cells and 4 server starts against the dense grid's 10 and 5" in text
    assert "for coding/x: schedule 2 from 1, 0 from 64" in text
    unfinished = {**TRACE, "result": {**TRACE["result"], "stop": None}}
    assert answer_sentence(unfinished) is None


def test_the_lines_mark_measured_cells_and_name_a_length_that_matters():
    text = "\n".join(trace_lines(TRACE))
    assert "1.50 [1.40,1.60]*" in text and "3.00 [2.90,3.10] " in text  # interpolated: no *
    assert "4 cells on 4 server(s): baseline, k=1, k=2, k=2 a=0.9" in text
    assert "the cost DEPENDS on the length" in text
    assert "(i.i.d. acceptance 0.800, assumed" in text
    assert "vllm: no" in text and "set on sim: --x a.json" in text
    html = trace_section(TRACE)
    assert html.startswith("<h2>Step cost surface</h2>") and "1.50 [1.40,1.60]*" in html


def test_decision_and_files(tmp_path):
    entry = surface_decision(TRACE)["surface"]
    assert entry["table"] == TRACE["result"]["table"] and entry["files_in"] == \
        "surface-schedule"
    write_surface_files(tmp_path, TRACE)
    # the domain made path-safe; an engine that refused writes nothing
    folder = tmp_path / "surface-schedule" / "coding_x"
    assert (folder / "sim" / "a.json").read_text() == "{}\n"
    assert (folder / "sim" / "flags.txt").read_text() == "--x a.json\n"
    assert not (folder / "vllm").exists()
    json.dumps(entry)  # decision.json takes it as it is


def test_a_forced_length_names_its_rate():
    # the chain at depth 4: a = 0.5 -> 1 + 0.5 + 0.25 + 0.125 + 0.0625 = 1.9375;
    # a = 0.9 -> 1 + 0.9 + 0.81 + 0.729 + 0.6561 = 4.0951
    assert rate_index(1.9375, 4, (0.5, 0.9)) == 0
    assert rate_index(4.0951, 4, (0.5, 0.9)) == 1
    assert rate_index(3.0, 4, (0.5, 0.9)) is None and rate_index(None, 4, (0.5,)) is None
