"""A tiny speculation question end to end on the simulator, through the real run loop (grid/run.py
-> grid/execute/search.py -> the controller -> Ray actors -> simulator processes -> Parquet): 2
loads x 2 depths, forced acceptance (`grid.search.forced=true`), the drafter's profile given. The
surface in search.json is each forced cell's L x T_baseline / T_forced as the report's analysis
reads them, the prediction is the profile's AL(k) over it; the same command again measures
nothing new and writes the same trace; a plan from its surface predicts before any server starts.
Without a profile, by default, the run's own drafter's cells are the surface's points, its
profile and its confirmation."""

from __future__ import annotations

import json

import pytest

from grid.report.data import load_run
from grid.run import run
from tests.grid.execute.smoke_runs import served_starts

# ~1 min on the shared 2-core machine (three simulator starts, six cells): slow.
pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]
SEARCH = ["+sweep=speculation", "grid.search.concurrency=[1,2]", "grid.search.coarse_levels=2",
          "grid.search.depths=[0,1,2]", "grid.search.rates=[0.8]", "workload.max_new_tokens=32",
          "load.num_requests=8", "load.warmup_requests=1", "load.client_cpus=0.5"]
# a = (0.9, 0.5): AL(1) = 1.9, AL(2) = 1 + 0.9 + 0.45 = 2.35
PROFILE = {"format": "specgrid.acceptance_profile/1", "source": "hand", "unit": "requests",
           "level": 0.95, "domains": {"coding": {
               "positions": 2, "samples": 10, "conditional": [0.9, 0.5],
               "conditional_interval": [[0.9, 0.9], [0.5, 0.5]], "marginal": [0.9, 0.45],
               "marginal_interval": [[0.9, 0.9], [0.45, 0.45]]}}}


def test_the_question_costs_its_forced_cells_predicts_and_replays(tmp_path):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(PROFILE))
    command = [*SEARCH, "grid.search.forced=true", f"grid.search.profile={profile}",
               f"results_dir={tmp_path}"]
    lines: list[str] = []
    first = run(command, echo=lines.append)
    assert first.exit_code == 0, "\n".join(lines)
    run_dir = first.run_dir
    trace = json.loads((run_dir / "search.json").read_text())
    res = trace["result"]
    # 2 loads x (the baseline, k=1 and k=2 forced, k=0 unforced: the simulator runs depth 0):
    # 8 cells on 4 servers; no cell has a neighbour on both sides, so no check: the search
    # stops at once.
    assert trace["kind"] == "speculation" and res["stop"] == "fits"  # a profile given: no
    assert res["confirmation"]["cells"] == 0  # confirmation (not the run's drafter)
    assert (res["cells"], res["starts"], len(served_starts(run_dir))) == (8, 4, 4)
    # depth 0 at each load: one token a step, c(B, 0) = T_baseline / T_0
    zero = {z["load"]: z for z in res["zero"]}
    assert set(zero) == {1, 2} and all(z["measured"] for z in zero.values())
    assert (res["dense_cells"], res["dense_starts"]) == (6, 3)

    data = load_run(run_dir)
    tput = data.stats.table.set_index(["variant", "concurrency"]).output_tok_s
    length = data.cells.set_index(["variant", "concurrency"]).accept_length_decode
    for row in res["table"]:
        b, k = row["load"], row["depth"]
        # the chain of a = 0.8: rates 0.8 at k=1, 0.8 and 0.64 at k=2 (the simulator takes rates)
        forced = f"eagle3__speculative_num_steps-{k}__forced_rates-" + {1: "0.8", 2: "0.8_0.64"}[k]
        expected = length[(forced, b)] * tput[("baseline", b)] / tput[(forced, b)]
        assert row["measured"] and row["cost"] == pytest.approx(expected, abs=1e-4)
        lo, hi = row["interval"]
        assert lo <= row["cost"] <= hi
    cost = {(r["load"], r["depth"]): r["cost"] for r in res["table"]}
    predicted = res["prediction"]["domains"]["coding"]
    for cell in predicted["cells"]:
        al = {1: 1.9, 2: 2.35}[cell["depth"]]
        assert cell["accept_length"] == pytest.approx(al)
        assert cell["break_even"] == pytest.approx(cost[(cell["load"], cell["depth"])], abs=1e-4)
        assert cell["speedup"] == pytest.approx(al / cell["break_even"], rel=1e-3)
    for b, z in zero.items():
        expected = tput[("baseline", b)] / tput[("eagle3__speculative_num_steps-0", b)]
        assert z["cost"] == pytest.approx(expected, abs=1e-4)
    # beside each load's best depth, the depths whose interval reaches the best's (the
    # baseline's: the point 1), as decision.json carries them
    for b, best in predicted["best"].items():
        floor = 1.0 if best == 0 else next(c["interval"][0] for c in predicted["cells"]
                                           if (str(c["load"]), c["depth"]) == (b, best))
        reach = [c["depth"] for c in predicted["cells"]
                 if str(c["load"]) == b and c["interval"][1] >= floor]
        assert predicted["plausible_depths"][b] == sorted([0] * (floor <= 1.0) + reach)
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["speculation"]["prediction"]["domains"]["coding"]["plausible_depths"] == \
        predicted["plausible_depths"]
    assert decision["speculation"]["table"] == res["table"]
    assert decision["speculation"]["recommendation"] == res["recommendation"]
    assert "search: speculation of eagle3 vs baseline on coding" in \
        (run_dir / "report.md").read_text()

    starts = len(served_starts(run_dir))
    again = run(command, echo=lambda _: None)
    assert again.exit_code == 0 and again.run_dir == run_dir
    assert len(served_starts(run_dir)) == starts
    assert json.loads((run_dir / "search.json").read_text()) == trace

    shown: list[str] = []
    plan = run([*SEARCH, "grid.search.forced=true", f"grid.search.surface={run_dir}",
                f"grid.search.profile={profile}",
                "plan=true", f"results_dir={tmp_path}"], echo=shown.append)
    text = "\n".join(shown)
    assert plan.exit_code == 0 and plan.cell_ids == [], text
    assert f"from {run_dir}: nothing is measured" in text
    assert "predicted for coding (profile hand" in text
    assert len(served_starts(run_dir)) == starts


def test_the_runs_own_drafter_confirms_the_prediction_where_it_decides(tmp_path):
    # depths 1 and 3 at c=1, 2, the drafter's own cells (nothing forced): the surface's points
    # (c = L x T_b / T_v at their measured length), its profile; the confirmation measures its
    # own cells where the prediction decides
    command = [*SEARCH[:3], "grid.search.depths=[0,1,3]", *SEARCH[4:],
               f"results_dir={tmp_path}"]
    lines: list[str] = []
    first = run(command, echo=lines.append)
    assert first.exit_code == 0, "\n".join(lines)
    run_dir = first.run_dir
    trace = json.loads((run_dir / "search.json").read_text())
    res = trace["result"]
    assert (res["surface_stop"], res["stop"]) == ("fits", "confirmed")
    confirm = [s for s in trace["steps"] if s.get("phase") == "confirm"]
    assert confirm and confirm[-1]["stop"] == "confirmed"
    # each own cell's speedup is its tok/s over the baseline's at its load, as the report reads
    data = load_run(run_dir)
    tput = data.stats.table.set_index(["variant", "concurrency"]).output_tok_s
    own = {(o["load"], o["depth"]): o for o in res["confirmation"]["own"]}
    assert {(1, 1), (1, 3), (2, 1), (2, 3)} <= set(own)  # the surface's cells
    length = data.cells.set_index(["variant", "concurrency"]).accept_length_decode
    assert res["points_from"] == "own" and trace["forced"] is False
    for (b, k), o in own.items():
        name = f"eagle3__speculative_num_steps-{k}"
        expected = tput[(name, b)] / tput[("baseline", b)]
        assert o["speedup"] == pytest.approx(expected, abs=1e-4)
        if (b, k) in ((1, 1), (1, 3), (2, 1), (2, 3)):
            row = next(r for r in res["table"] if (r["load"], r["depth"]) == (b, k))
            assert row["measured"] and row["source"] == "own"
            assert row["cost"] == pytest.approx(length[(name, b)] / expected, abs=1e-3)
    rec = res["recommendation"]
    assert rec is not None and rec["status"] in ("predicted", "confirmed", "measured")
    assert {t["status"] for t in rec["tiers"]} <= {"predicted", "confirmed", "measured"}
    # a single depth exactly where a depth pays at the lowest load (the prediction's best there)
    dom = next(iter(res["prediction"]["domains"].values()))
    assert (rec["single"] is None) == (dom["best"][str(min(map(int, dom["best"])))] == 0)
    assert (run_dir / "report.md").read_text().count("recommendation (") >= 1
    starts = len(served_starts(run_dir))
    assert run(command, echo=lambda _: None).exit_code == 0
    assert len(served_starts(run_dir)) == starts
    assert json.loads((run_dir / "search.json").read_text()) == trace
