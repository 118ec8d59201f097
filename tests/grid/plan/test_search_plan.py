"""The plan of an adaptive search (grid/plan/search.py): bad input is one line and exit 2
before anything starts; `plan=true` shows the first step's cells and the budget and writes
nothing; the cells the search may choose are ordinary cells (a dense grid's ids)."""

from __future__ import annotations

import pytest

from grid.run import make_plan, run
from tests.grid.plan.bad_input import assert_bad_input

SEARCH = ["+sweep=crossover_search"]
AS_SEARCH = ["workload.max_new_tokens=96", "load.target=null", "run.sim_time_scale=null"]
"""+sweep=concurrency with the searches' workload, load and clock (they keep 96 output tokens,
fixed counts and the simulator's clock at the wall's)."""
BAD = [
    (["grid.search.concurrency=[]"], "grid.search.concurrency must be [lowest, highest]"),
    (["grid.search.concurrency=[8,8]"], "1 <= lowest < highest, got [8, 8]"),
    (["grid.search.concurrency=[0,16]"], "1 <= lowest < highest, got [0, 16]"),
    (["grid.search.concurrency=[1,4,16]"], "got [1, 4, 16]"),
    (["grid.search.max_cells=1"], "grid.search.max_cells must be >= 2, got 1"),
    (["grid.search.resolution=1"], "grid.search.resolution must be > 1, got 1"),
    (["grid.search.max_repeats=0"], "grid.search.max_repeats must be >= 1, got 0"),
    (["grid.search.kind=bisect"], "grid.search.kind='bisect' is not one of crossover"),
    (["grid.search.kind=threshold", "grid.search.candidates=1"],
     "grid.search.candidates must be >= 2, got 1"),
    (["grid.search.kind=threshold", "grid.search.candidates=3", "grid.search.max_cells=7"],
     "grid.search.max_cells=7 leaves the crossover search fewer than 4 cells after the 4 kept "
     "for confirming 3 candidates"),
    (["load.concurrency=1,2"], "drop the grid axis concurrency"),
    (["+grid.axes.repeat=[0,1]"], "drop the grid axis repeat"),
    (["load.rate=5"], "searches closed-loop concurrency; unset load.rate"),
    (["grid.search.concurrency=[1,2]", "grid.axes.variant=[eagle3]"],
     "compares one variant with the baseline on one workload"),
    (["grid.search.concurrency=[1,2]", "workload=coding,math"],
     "compares one variant with the baseline on one workload"),
    (["grid.search.prior=/no/such/twin.json"],
     "grid.search.prior=/no/such/twin.json: no such file (a twin's profile: python -m "
     "grid.twin results/RUN writes results/RUN/twin.json)"),
    (["grid.search.kind=depth", "grid.search.depths=[0,1,3]",
      "grid.search.prior=engines/sim/profiles/default.json"],
     "engines/sim/profiles/default.json is not a twin's profile"),
    (["grid.search.prior=engines/sim/profiles/default.json"],
     "engines/sim/profiles/default.json is not a twin's profile"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD)
def test_bad_search_is_one_line_before_anything_starts(overrides, message, tmp_path, capsys):
    assert_bad_input([*SEARCH, *overrides], message, tmp_path / "results", capsys)


def test_plan_shows_the_first_step_and_the_budget(tmp_path):
    lines: list[str] = []
    outcome = run([*SEARCH, "grid.search.concurrency=[1,16]", "grid.search.max_cells=12",
                   "plan=true", f"results_dir={tmp_path}"], echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0
    # [1, 16] in √2 steps: 1 1.41 2 2.83 4 5.66 8 11.3 16 -> 1 2 3 4 6 8 11 16; coarse levels
    # 1 16^(1/4)=2 4 8 16; the first step measures those up to √(1 x 16) = 4.
    assert "lattice (8 levels): 1 2 3 4 6 8 11 16; coarse levels 1 2 4 8 16" in text
    assert "budget: grid.search.max_cells=12 (a dense grid of this lattice: 16 cells)" in text
    assert "step 1: coarse levels up to the range's geometric middle: c=1, c=2, c=4 -> 6 cells" \
        in text
    listed = [line for line in lines for part in line.splitlines()
              if part.strip().startswith("cell ")]
    assert "6 cells in 2 server groups" in text and listed
    assert len(outcome.cell_ids) == 6
    assert not any(tmp_path.iterdir())  # planning writes nothing


def test_search_cells_are_the_dense_grid_cells():
    search = make_plan([*SEARCH, "grid.search.concurrency=[1,4]"])
    dense = make_plan(["+sweep=concurrency", "load.concurrency=1,2,3,4", *AS_SEARCH])
    assert search.search is not None
    repeat0 = {c.cell_id for (load, r), cells in search.search.points.items() if r == 0
               for c in cells}
    # lattice 1 2 3 4 (x baseline, eagle3), repeats 0..2: the repeat-0 cells are the dense ones
    assert repeat0 == {c.cell_id for c in dense.plan.cells}
    assert len(search.search.points) == 4 * 3


def test_derived_repeats_are_the_composed_repeats():
    # The search composes repeat 0 of each level and derives repeats 1, 2 (with_repeats); a
    # grid that composes all three through Hydra must give the same cell ids.
    search = make_plan([*SEARCH, "grid.search.concurrency=[1,2]"])
    dense = make_plan(["+sweep=concurrency", "load.concurrency=1,2", "grid.axes.repeat=[0,1,2]",
                       *AS_SEARCH])
    assert search.search is not None
    ids = {c.cell_id for cells in search.search.points.values() for c in cells}
    assert len(ids) == 2 * 2 * 3
    assert ids == {c.cell_id for c in dense.plan.cells}


def test_threshold_plan_names_the_candidates(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=threshold_search", "variant.args.max_running_requests=64",
                   "grid.search.concurrency=[16,64]", "plan=true", f"results_dir={tmp_path}"],
                  echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0, text
    # SGLang's speculative capture sizes from 16 to 63 (the running cap is 64): 16..32 step 2
    # and 40..60 step 4 (engines/sglang/adaptive.py decode_capture_sizes).
    assert ("then: the 15 speculative_disable_above_batch values the engine tells apart in "
            "the range (16 18 20 22 24 26 28 30 32 40 44 48 ... 60) ranked by predicted "
            "regret; the top 2 confirmed where they differ (2 of the cells kept for it)") in text
    assert "search: threshold of eagle3 vs baseline on coding, concurrency 16..64" in text


def test_confirmation_cells_are_the_composed_threshold_cells():
    # A confirmation pair's cells are derived from the planned EAGLE-3 cell (pair_cells);
    # a dense grid that composes the same thresholds and load through Hydra gives the same ids.
    search = make_plan(["+sweep=threshold_search", "grid.search.concurrency=[1,4]"])
    assert search.search is not None
    low, high = search.search.pair_cells((24, 28, 1))
    dense = make_plan(["+sweep=concurrency", *AS_SEARCH, "grid.axes.variant=[eagle3]",
                       "load.concurrency=28,32", "variant.speculative_disable_above_batch=24,28",
                       "grid.axes.repeat=[1]"])
    by_threshold = {c.config["variant"]["speculative_disable_above_batch"]: c
                    for c in dense.plan.cells if c.concurrency == 28}
    assert (low.cell_id, high.cell_id) == (by_threshold[24].cell_id, by_threshold[28].cell_id)
    assert (low.variant, high.variant) == ("eagle3__off_above-24", "eagle3__off_above-28")
    assert low.server_key != high.server_key and low.concurrency == high.concurrency == 28


def test_a_twin_as_prior_chooses_the_first_levels(tmp_path):
    from tests.engines.sim.twin.ground_truth import write_twin

    # a twin of h200 / llama3.1-8b (cells of its closed form at four loads); the sweep's
    # eagle3 runs at most 64 requests (its max_running_requests), so the twin predicts it
    # paying to c=64 and losing beyond, where the baseline's batch keeps growing
    twin = write_twin(tmp_path)
    lines: list[str] = []
    outcome = run([*SEARCH, "hardware=h200", "model=llama3.1-8b", f"grid.search.prior={twin}",
                   "plan=true", f"results_dir={tmp_path / 'results'}"], echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0, text
    assert "prior: SIMULATION (twin of RUN) predicts the speedup c=1 +" in text
    assert ("step 1: the levels the prior (SIMULATION (twin of RUN)) points to: c=64, c=91 -> "
            "4 cells") in text
    assert len(outcome.cell_ids) == 4


def test_a_twin_as_prior_starts_each_depth_level_at_its_predicted_best(tmp_path):
    from tests.engines.sim.twin.ground_truth import write_twin

    twin = write_twin(tmp_path)
    lines: list[str] = []
    outcome = run(["+sweep=depth_search", "hardware=h200", "model=llama3.1-8b",
                   f"grid.search.prior={twin}", "plan=true",
                   f"results_dir={tmp_path / 'results'}"], echo=lines.append)
    text = "\n".join(lines)
    assert outcome.exit_code == 0, text
    assert "prior: SIMULATION (twin of RUN) predicts the best depth c=1 5, " in text
    assert ("step 1: coarse at c=1, c=11, c=128 (the prior's best depth and its neighbours "
            "first) -> 9 cells") in text
    # at c=1 the twin predicts depth 5 fastest: depths 3, 5 and 7 first, not the baseline
    first = [line for line in text.splitlines()
             if line.strip().startswith("cell ") and " c=1 " in line]
    assert sorted(line.split()[2] for line in first) == [
        "eagle3__speculative_num_steps-3", "eagle3__speculative_num_steps-5",
        "eagle3__speculative_num_steps-7"], first
