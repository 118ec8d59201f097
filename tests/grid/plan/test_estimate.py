"""The plan's duration estimate comes from the engine (grid/plan/estimate.py): the simulator
answers from its own model (the twin's closed form of a closed loop, engines/sim/estimate.py),
a real engine from the cells this run folder measured on its server, else the plan says it does
not know. Real Hydra configs, nothing started."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import engines
from engines.sim.estimate import PROMPT_TOKENS
from engines.sim.model import PerfModel
from engines.sim.profile import load_profile
from grid.plan.build import RunEstimate, estimate_run, format_plan
from grid.plan.estimate import (
    CELL_OVERHEAD_S,
    RUN_OVERHEAD_S,
    Measured,
    measured_seconds,
)
from grid.run import make_plan
from grid.store.results import write_cell

EXTERNAL = ["+sweep=smoke", "grid.axes.variant=[baseline]", "engine=external",
            "engine.options.url=http://127.0.0.1:9"]
"""Two cells (c=1, c=4; 6 requests each, 16 tokens) on one server nobody launches."""


def _cells(plan):
    return {c.concurrency: c for c in plan.cells}


def test_the_simulators_estimate_is_its_own_model_of_the_cell(tmp_path):
    plan = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"]).plan
    baseline = {c.concurrency: c for c in plan.cells if c.variant == "baseline"}
    cell = baseline[1]
    options = cell.config["engine"]["options"]
    profile = load_profile(options.get("profile") or "default", options.get("hardware"),
                           options.get("model"))
    model = PerfModel(profile.roofline(1, {}, dict(cell.config["variant"]["args"]))[0])
    # A wave of one stream: the prompt's prefill, then 15 decode steps (the first token comes
    # from the prefill) over a KV read growing from 200 to 216 tokens (Simpson's rule)
    step = (model.decode_s(1, 200) + 4 * model.decode_s(1, 208) + model.decode_s(1, 216)) / 6
    wave = model.prefill_s(PROMPT_TOKENS, PROMPT_TOKENS) + 15 * step
    # 6 requests one at a time and the warm-up request: 7 waves; the driver's 1.5 s per cell
    by_hand = 7 * wave + 1.5
    assert plan.cell_estimate(cell) == (pytest.approx(by_hand), "engine")
    assert by_hand == pytest.approx(3.451, abs=1e-3)  # 7 x (0.1153 + 15 x 0.01090) + 1.5
    # The run: Ray's start, two simulated servers' starts (4 s each), the four cells.
    seconds = [plan.cell_seconds(c) for c in plan.cells]
    assert None not in seconds
    total = RUN_OVERHEAD_S + 2 * 4.0 + sum(s for s in seconds if s is not None)
    run = estimate_run(plan)
    assert run.seconds == pytest.approx(total) and not run.unknown and not run.measured
    assert total == pytest.approx(34.95, abs=0.01)  # the plan, with the default anchor refitted
    assert f"estimate: ~{total / 60:.1f} min (rough; servers run one after another)" in \
        format_plan(plan)


def test_a_forced_cell_is_estimated_at_its_forced_length(tmp_path):
    plan = make_plan(["+sweep=smoke", "grid.axes.variant=[eagle3]", "grid.axes.concurrency=[1]",
                      "variant.forced_acceptance.length=2.5", f"results_dir={tmp_path}"]).plan
    (cell,) = plan.cells
    options, args = cell.config["engine"]["options"], dict(cell.config["variant"]["args"])
    profile = load_profile(options.get("profile") or "default", options.get("hardware"),
                           options.get("model"))
    model = PerfModel(profile.roofline(1, {}, args)[0])
    # eagle3: 3 draft steps, 4 draft tokens; the 15 tokens after the prefill's take 15 / 2.5
    # verify steps, the prefill is the target's and the drafter's
    step = (model.spec_step_s(1, 3, 4, 200) + 4 * model.spec_step_s(1, 3, 4, 208)
            + model.spec_step_s(1, 3, 4, 216)) / 6
    wave = model.prefill_s(PROMPT_TOKENS, PROMPT_TOKENS, speculative=True) + 15 / 2.5 * step
    by_hand = 7 * wave + 1.5
    assert plan.cell_estimate(cell) == (pytest.approx(by_hand), "engine")
    assert by_hand == pytest.approx(3.488, abs=1e-3)  # 7 x (0.1163 + 6 x 0.02795) + 1.5


def test_an_open_loop_is_its_arrivals_and_one_request_at_the_batch_they_make(tmp_path):
    plan = make_plan(["+sweep=smoke", "grid.axes.variant=[baseline]", "~grid.axes.concurrency",
                      "+grid.axes.rate=[2,40]", f"results_dir={tmp_path}"]).plan
    slow, fast = sorted(plan.cells, key=lambda c: c.rate)
    options = slow.config["engine"]["options"]
    profile = load_profile(options.get("profile") or "default", options.get("hardware"),
                           options.get("model"))
    model = PerfModel(profile.roofline(1, {}, dict(slow.config["variant"]["args"]))[0])

    def wave(b: int) -> float:  # b requests of 200 prompt and 16 output tokens, together
        step = sum(w * model.decode_s(b, b * kv) for w, kv in ((1, 200), (4, 208), (1, 216)))
        return model.prefill_s(b * PROMPT_TOKENS, b * PROMPT_TOKENS) + 15 * step / 6

    # 2/s: 6 arrivals over 3 s, a request's 0.28 s alone (2 x 0.28 rounds to a batch of 1)
    assert plan.cell_estimate(slow) == (pytest.approx(6 / 2 + wave(1) + 1.5), "engine")
    # 40/s: 6 arrivals over 0.15 s, a request's life at the 40 x 0.28 = 11 it overlaps with
    assert plan.cell_estimate(fast) == (pytest.approx(6 / 40 + wave(11) + 1.5), "engine")
    assert wave(11) == pytest.approx(0.804, abs=1e-3)  # 0.395 s of prefill + 15 x 27 ms


@pytest.mark.parametrize("name", ["sglang", "vllm", "external"])
def test_a_real_engine_cannot_tell_before_measuring(name):
    assert engines.modeller(name) is None


def test_a_real_engine_with_nothing_measured_is_unknown_in_the_plan(tmp_path):
    plan = make_plan(EXTERNAL + [f"results_dir={tmp_path}"]).plan
    assert plan.measured == {}  # no run folder yet
    assert [plan.cell_estimate(c) for c in plan.cells] == [(None, "unknown")] * 2
    assert estimate_run(plan).seconds is None
    assert format_plan(plan).splitlines()[-1] == (
        "estimate: 2 cell(s) unknown (real engine, nothing measured yet for this server)")


def test_measured_cells_estimate_the_cells_of_their_server(tmp_path):
    plan = make_plan(EXTERNAL + [f"results_dir={tmp_path}"]).plan
    one, four = _cells(plan)[1], _cells(plan)[4]
    plan.measured = {
        one.cell_id: Measured(one.server_key, concurrency=1, rate=None, requests=6,
                              seconds=12.0),
        "other-server": Measured("elsewhere", concurrency=4, rate=None, requests=6, seconds=1.0),
        "open-loop": Measured(one.server_key, concurrency=None, rate=4.0, requests=6,
                              seconds=1.0),
    }
    # c=1: its own window, 12 s, + 1.5 s per cell
    assert plan.cell_estimate(one) == (12.0 + 1.5, "measured")
    # c=4: the nearest closed loop of its server (c=1; the other server's and the open loop
    # are not), 12 s x (6 / 6 requests) x (1 / 4 in flight), + 1.5 s
    assert plan.cell_estimate(four) == (12.0 * 6 / 6 * 1 / 4 + 1.5, "measured")
    # the run: Ray (15 s), the external server's start (1 s), both cells: 15 + 1 + 13.5 + 4.5
    assert estimate_run(plan).seconds == pytest.approx(34.0)
    assert format_plan(plan).splitlines()[-1] == (
        "estimate: ~0.6 min (rough; 2 cell(s) from the measured cells of their server in this "
        "or an earlier run folder; servers run one after another)")
    # one measured cell of its own only: the other cell is still estimated from it
    plan.measured = {four.cell_id: Measured(four.server_key, 4, None, 6, 3.0)}
    assert plan.cell_estimate(one) == (3.0 * 6 / 6 * 4 / 1 + 1.5, "measured")


def test_an_open_loop_is_estimated_from_the_nearest_measured_rate():
    cell = SimpleNamespace(cell_id="c", server_key="s", rate=4.0, concurrency=None)
    measured = {"a": Measured("s", None, 2.0, requests=10, seconds=5.0),
                "b": Measured("s", None, 16.0, requests=10, seconds=1.0),
                "closed": Measured("s", 4, None, requests=10, seconds=99.0)}
    # rate 2 is nearer to 4 than 16 on a log scale (x2 against x4): 5 s x (20 / 10 requests)
    # x (2 / 4 per second)
    assert measured_seconds(cell, 20, measured) == 5.0 * 20 / 10 * 2 / 4  # type: ignore[arg-type]
    assert measured_seconds(cell, 20, {"closed": measured["closed"]}) is None  # type: ignore[arg-type]


def test_cells_of_their_kind_only_and_some_unknown_make_the_estimate_a_lower_bound(tmp_path):
    plan = make_plan(EXTERNAL + [f"results_dir={tmp_path}"]).plan
    one, four = _cells(plan)[1], _cells(plan)[4]
    # only an open loop measured on the server: its closed-loop cells stay unknown
    plan.measured = {"open": Measured(one.server_key, None, 2.0, requests=6, seconds=3.0)}
    assert estimate_run(plan).seconds is None
    # what is known is a lower bound: 2 min of known cells, one unknown
    line = RunEstimate(120.0, [four], 0).line("servers run one after another")
    assert line == ("estimate: at least ~2.0 min (rough; servers run one after another); "
                    "1 cell(s) unknown (real engine, nothing measured yet for this server)")
    other = SimpleNamespace(server_key="another")
    assert RunEstimate(None, [four, other], 0).line("") == (  # type: ignore[list-item]
        "estimate: 2 cell(s) unknown (real engine, nothing measured yet for their servers)")


def test_the_plan_reads_the_run_folders_measured_cells(tmp_path):
    plan = make_plan(EXTERNAL + [f"results_dir={tmp_path}"]).plan
    one = _cells(plan)[1]
    write_cell(plan.run_dir, variant="baseline", workload="coding", cell_id=one.cell_id,
               attempt=1, requests=[], server_metrics=[],
               cell_row={"run_id": plan.run_id, "cell_id": one.cell_id, "attempt": 1,
                         "status": "done", "server_key": one.server_key, "concurrency": 1,
                         "num_requests": 6, "duration_s": 8.0})
    again = make_plan(EXTERNAL + [f"results_dir={tmp_path}"]).plan  # the same run folder
    assert again.measured == {one.cell_id: Measured(one.server_key, 1, None, 6, 8.0)}
    assert again.cell_estimate(_cells(again)[1]) == (8.0 + CELL_OVERHEAD_S, "measured")
