"""The speculation question's trace in the report: the answer, the lines, decision.json's entry
and the settings written beside the report, on a hand-made trace."""

import json

from grid.questions.speculation.read import rate_index
from grid.questions.speculation.report import (
    answer_sentence,
    speculation_decision,
    trace_lines,
    trace_section,
    write_settings,
)


def row(b, k, cost, measured=True):
    return {"load": b, "depth": k, "cost": cost, "interval": [cost - 0.1, cost + 0.1],
            "measured": measured}


SETTING = {"engine": "sim", "flags": ["--x", "a.json"], "command": "--x a.json",
           "files": {"a.json": "{}\n"}, "tiers": [[1, None, 2]]}
REC = {"domain": "coding/x", "status": "measured",
       "text": "for coding/x: set speculative_disable_above_batch=8 at depth 2 (confirmed); "
               "by batch size: depth 2 from batch 1 (confirmed), baseline from batch 64 "
               "(measured)",
       "settings": {"sim": SETTING, "vllm": {"engine": "vllm", "refused": "no"}}}
TRACE = {
    "kind": "speculation", "baseline": "baseline", "variant": "eagle3", "workload": "coding",
    "lattice": [1, 64], "depths": [1, 2], "rates": [0.5, 0.9],
    "steps": [{"number": 1, "why": "coarse", "points": [[1, 0, 0], [1, 1, 0], [1, 2, 0],
                                                         [1, 2, 1]], "stop": None},
              {"number": 2, "why": "all 0 checks agree", "points": [], "stop": "fits"}],
    "result": {
        "stop": "fits", "stop_meaning": "every cell agrees", "cells": 4, "starts": 4,
        "dense_cells": 10, "dense_starts": 5, "design": {"loads": [1, 64], "depths": [1, 2]},
        "checks": [], "points_from": "forced",
        "zero": [{"load": 1, "cost": 1.25, "interval": [1.2, 1.3], "measured": True,
                  "speedup": 0.8, "speedup_interval": [0.77, 0.83], "verdict": "slower"}],
        "points": [{"load": 1, "depth": 2, "cost": 1.8, "interval": [1.7, 1.9], "source": "own"},
                   {"load": 64, "depth": 2, "cost": 4.4, "interval": [4.2, 4.6],
                    "source": "confirm"}],
        "table": [row(1, 1, 1.5), row(1, 2, 2.0), row(64, 1, 3.0, False), row(64, 2, 4.0)],
        "decomposition": {"1": {"fixed": 0.0, "fixed_interval": [-0.1, 0.1], "draft": 0.5,
                                "draft_interval": [0.4, 0.6],
                                "verify_excess": {"1": 0.0, "2": 0.0}}, "64": None},
        "leviathan": {"load": 1, "acceptance": 0.8, "assumed": True,
                      "rows": [{"depth": 1, "accept_length": 1.8, "surface": 1.2,
                                "leviathan": 1.2}]},
        "length_checks": [{"load": 1, "depth": 2, "lengths": [2.0, 2.8], "difference": 0.3,
                           "interval": [0.2, 0.4], "agrees": False}],
        "prediction": {"source": "hand", "unit": "requests", "widened": {"1": 0.1},
                       "domains": {"coding/x": {
            "samples": 10, "accept_length": [1.8, 2.4],
            "cells": [{"load": 1, "depth": 2, "speedup": 1.2, "interval": [1.1, 1.3],
                       "placed": "pays"}],
            "crossover": {"depth": 2, "text": "crossover at concurrency 11.3",
                          "statement": "set speculative_disable_above_batch=8"},
            "best": {"1": 2, "64": 0}, "plausible_depths": {"1": [2], "64": [0, 1, 2]},
            "schedule": [[1, 2], [64, 0]],
            "text": "depth 2 from batch 1, baseline from batch 64"}}},
        "confirmation": {"cells": 1, "max_cells": 12, "disagree": [[64, 2]],
                         "own": [{"load": 64, "depth": 2, "speedup": 0.9,
                                  "interval": [0.85, 0.95]}]},
        "recommendations": [REC]}}


def test_the_answer_is_the_recommendation_and_the_budget():
    text = answer_sentence(TRACE)
    assert text.startswith("eagle3 on coding: for coding/x: set speculative_disable_above_batch"
                           "=8 at depth 2 (confirmed); by batch size: depth 2 from batch 1 "
                           "(confirmed), baseline from batch 64 (measured) (measured)")
    assert "4 cells and 4 server starts against the dense grid's 10 and 5 (forced" in text
    unfinished = {**TRACE, "result": {**TRACE["result"], "stop": None}}
    assert answer_sentence(unfinished) is None


def test_the_lines_lead_with_the_recommendation_and_mark_what_is_known_how():
    lines = trace_lines(TRACE)
    assert lines[1].startswith("  recommendation (measured) for coding/x: set "
                               "speculative_disable_above_batch=8")
    text = "\n".join(lines)
    assert "1.50 [1.40,1.60]*" in text and "3.00 [2.90,3.10] " in text  # interpolated: no *
    assert "4 cells on 4 server(s): baseline, k=1, k=2, k=2 a=0.9" in text
    assert "(* measured: forced cells (forced acceptance" in text
    assert "against the baseline, 1 / c(B, 0), 95 % (* measured): c=1 0.80x [0.77,0.83]* slower" \
        in text
    # the drafter's own cells are points of the surface too, each saying where it came from
    assert ("c=1 k=2 1.80 [1.70,1.90] (own); c=64 k=2 4.40 [4.20,4.60] (confirm)" in text)
    own = {**TRACE, "result": {**TRACE["result"], "points_from": "own", "points": []}}
    assert "(* measured: the drafter's own cells, unforced, c = L x T_b / T_v" in \
        "\n".join(trace_lines(own))
    assert "the cost DEPENDS on the length" in text
    assert "(i.i.d. acceptance 0.800, assumed" in text
    assert "vllm: no" in text and "set on sim: --x a.json" in text
    assert "1.20x [1.10,1.30]+" in text  # the drafter placed: pays at (1, 2)
    assert "c=64 k=2 0.90x [0.85,0.95] DISAGREES with the prediction" in text
    assert "configured depth 2: crossover at concurrency 11.3; set speculative_disable" in text
    assert "every prediction's interval widened by it, c=1 ±10%" in text
    # the best depth per load with the depths not ruled out beside it (none beside c=1's 2)
    assert "reaches the best's): c=1 2, c=64 0 (not ruled out: 1, 2); depth 2 from" in text
    html = trace_section(TRACE)
    assert html.startswith("<h2>Speculation</h2>") and "1.50 [1.40,1.60]*" in html


def test_decision_and_files(tmp_path):
    entry = speculation_decision(TRACE)["speculation"]
    assert next(iter(entry)) == "recommendation"  # first in decision.json's entry
    assert entry["table"] == TRACE["result"]["table"] and entry["files_in"] == "speculation"
    assert entry["points_from"] == "forced" and entry["points"] == TRACE["result"]["points"]
    assert entry["zero"] == TRACE["result"]["zero"]
    assert entry["prediction"]["domains"]["coding/x"]["plausible_depths"] == {
        "1": [2], "64": [0, 1, 2]}
    write_settings(tmp_path, TRACE)
    # the domain made path-safe; an engine that refused writes nothing
    folder = tmp_path / "speculation" / "coding_x"
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
