"""A simulated run's assumed interior in the report (grid/report/assumed.py): the loads to
measure, the threshold when both ends of the modelled crossover range agree, "undetermined"
when they do not, the answer sentence, and the line under the SIMULATION banner of a real run
folder. Ranges are chosen so the expected thresholds are known beforehand."""

from __future__ import annotations

import json

from engines.modelling import AssumedInterior
from grid.analysis import analyse_cells, decide
from grid.report.answer import answer
from grid.report.assumed import bounded, loads_to_measure, threshold_below
from grid.report.data import load_run
from tests.grid.analysis.synthetic import grid, write_run
from tests.grid.report.test_answer import PAYS_TO_2


def interior(lo: float, hi: float) -> AssumedInterior:
    return AssumedInterior((1.0, 64.0), (lo, hi), ("excess per verified token",),
                           ("excess per speculative step (misses ...)",), "python -m x")


def test_the_loads_to_measure_bracket_the_range_by_powers_of_two():
    assert loads_to_measure((1.27, 1.31), [1, 2, 64]) == [1, 2]
    assert loads_to_measure((1.5, 5.0), [1, 2, 64]) == [1, 2, 4, 8]
    assert loads_to_measure((2.0, 2.0), [1, 2, 3, 64]) == [2, 3, 4]  # 3 was tested in between


def test_the_threshold_is_the_largest_tested_load_at_or_below():
    assert threshold_below([1, 2, 4, 64], 3.9) == 2
    assert threshold_below([1, 2, 4, 64], 4.0) == 4
    assert threshold_below([2, 4], 1.5) == 0


def test_a_range_inside_one_step_gives_that_threshold_and_names_what_to_measure():
    rec = {"variant": "eagle3", "workload": "coding", "speculative_disable_above_batch": 2}
    out = bounded(rec, interior(1.27, 1.31), [1, 2, 4, 8, 16, 32, 64])
    assert out["speculative_disable_above_batch"] == 1
    assert "undetermined" not in out
    assert out["assumed"]["measure"] == "1,2"
    assert out["statement"].startswith("set speculative_disable_above_batch=1 (the model puts "
                                       "the crossover at concurrency 1.27-1.31 ")


def test_a_range_across_tested_loads_is_undetermined_between_their_thresholds():
    rec = {"variant": "eagle3", "workload": "coding", "speculative_disable_above_batch": 1}
    out = bounded(rec, interior(1.3, 30.0), [1, 2, 4, 8, 16, 32, 64])
    assert out["speculative_disable_above_batch"] is None
    assert out["undetermined"] == [1, 16]
    assert out["assumed"]["measure"] == "1,2,4,8,16,32"
    assert out["statement"].startswith("undetermined between "
                                       "speculative_disable_above_batch=1 and 16")


def test_the_answer_follows_the_assumed_range():
    decision = decide(analyse_cells(*grid(PAYS_TO_2), replicates=200))
    (rec,) = decision.recommendations
    assert rec["speculative_disable_above_batch"] == 2  # the simulated cells' own crossover
    decision.recommendations = [bounded(rec, interior(1.3, 30.0), [1, 2, 4, 8])]
    text = answer(decision, "SIMULATION")
    assert text.startswith("eagle3 on coding: speculative_disable_above_batch is undetermined "
                           "between 1 and 8 (the model puts the crossover at concurrency "
                           "1.30-30.00 under every assumption that meets its anchor, which "
                           "measured c=1 and c=64 only): measure c=1,2,4,8,16,32 on your node "
                           "to settle it"), text
    decision.recommendations = [bounded(rec, interior(1.27, 1.31), [1, 2, 4, 8])]
    text = answer(decision, "SIMULATION")
    assert "speculative_disable_above_batch=1 (the model puts the crossover at concurrency " \
        "1.27-1.31 under" in text
    assert text.endswith("measure c=1,2 on your node to check it) (one repeat: within-run noise "
                         "only) [SIMULATION].")


def test_a_simulated_run_on_the_default_profile_says_where_its_curve_is_assumed(tmp_path):
    run = tmp_path / "run"
    options = json.dumps({"profile": "default", "model": "kimi-k2.5-class",
                          "hardware": "rtx-pro-6000"})
    write_run(run, PAYS_TO_2, cell_fields={"engine_options": options})
    data = load_run(run, replicates=100)
    texts = [text for _, text in data.validity]
    at = texts.index(data.sim_banner())
    assert data.validity[at + 1][0] == "note"  # the run stays quiet: one warning, SIMULATION
    assert texts[at + 1].startswith("assumed interior: the simulator's anchor measured c=1 and "
                                    "c=64 only; the loads in between are the model's "
                                    "assumption.")
    assert "excess per speculative step (misses the anchor's figures" in texts[at + 1]
    # these synthetic cells (100-token prompts, no server flags) are outside the calibrated
    # envelope: the range is not applied to their recommendation
    assert any(t.startswith("extrapolation:") for t in texts)
    (rec,) = data.decision.recommendations
    assert rec["speculative_disable_above_batch"] == 2 and "assumed" not in rec
