"""The twin's leave-one-load-out error (engines/sim/twin/holdout.py): every load is held out
once, the fit that predicts it never sees it, and the summary's numbers are the held-out
errors' mean, largest and signed mean."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engines.sim.twin import holdout, synthetic
from engines.sim.twin.analytic import Prediction
from engines.sim.twin.cells import observe
from engines.sim.twin.params import Space
from tests.engines.sim.twin.ground_truth import start, truth


def record_fits(monkeypatch) -> list[set[int]]:
    """The loads of every fit holdout.py makes from now on, in order (the fit itself runs)."""
    trained_on: list[set[int]] = []
    real_fit = holdout.fit

    def recording_fit(space, train, **kw):
        trained_on.append({o.load for o in train})
        return real_fit(space, train, **kw)

    monkeypatch.setattr(holdout, "fit", recording_fit)
    return trained_on


def test_each_load_is_held_out_once_and_predicted_by_a_fit_on_the_others(monkeypatch):
    cells = synthetic.cells(truth(), [1, 8, 64], noise=0.01)
    observed = [observe(c) for c in cells]
    trained_on = record_fits(monkeypatch)
    out = holdout.leave_one_load_out(Space.for_cells(start(), observed), observed,
                                     "baseline", seed=0)
    assert trained_on == [{8, 64}, {1, 64}, {1, 8}]
    by_load = {}
    for row in out["cells"]:
        by_load.setdefault(row["concurrency"], set()).add(row["extrapolation"])
    # the lowest and the highest load lie outside the range the other two cover
    assert by_load == {1: {True}, 8: {False}, 64: {True}}
    # 3 loads x 2 variants: tok/s, TTFT and TPOT of 6 cells, accept length and speedup of 3
    assert {m: s["n"] for m, s in out["metrics"].items()} == {
        "output_tok_s": 6, "ttft_p50_s": 6, "tpot_p50_s": 6, "accept_length": 3, "speedup": 3}
    assert out["metrics_inside"]["output_tok_s"]["n"] == 2


def test_the_summary_is_the_mean_largest_and_signed_mean_of_the_errors():
    errors = [{"metric": "output_tok_s", "error_pct": e} for e in (10.0, -20.0, 30.0)]
    s = holdout.summary(errors, seed=0)["output_tok_s"]
    assert s["n"] == 3
    assert s["mae_pct"] == pytest.approx(20.0)  # (10 + 20 + 30) / 3
    assert s["max_pct"] == 30.0
    assert s["bias_pct"] == pytest.approx(20.0 / 3)  # (10 - 20 + 30) / 3
    assert 10.0 <= s["lo"] <= 20.0 <= s["hi"] <= 30.0


def test_speedup_rows_pair_each_speculative_cell_with_the_baseline_at_its_load():
    cells = synthetic.cells(truth(), [4], noise=0.0)
    observed = [observe(c) for c in cells]
    base, spec = observed
    preds = [Prediction(output_tok_s=v, ttft_p50_s=0.01, tpot_p50_s=0.005,
                        accept_length=accept, acceptance_per_position=None, batch=4.0)
             for v, accept in ((100.0, None), (150.0, 3.0))]
    rows = holdout.rows(observed, preds, "baseline")
    speed = [r for r in rows if r["metric"] == "speedup"]
    assert len(speed) == 1 and speed[0]["cell_id"] == spec.cell.cell_id
    measured = spec.measured["output_tok_s"] / base.measured["output_tok_s"]
    assert speed[0]["measured"] == pytest.approx(measured)
    assert speed[0]["predicted"] == pytest.approx(1.5)  # 150 / 100



def test_a_chosen_split_fits_on_the_other_loads_and_predicts_the_held_ones(monkeypatch):
    cells = synthetic.cells(truth(), [1, 2, 4, 8], noise=0.0)
    observed = [observe(c) for c in cells]
    trained_on = record_fits(monkeypatch)
    out = holdout.split(Space.for_cells(start(), observed), observed, "baseline", [2, 8], 0)
    assert trained_on == [{1, 4}]
    assert out["held_out"] == [2, 8] and out["fitted_on"] == [1, 4]
    assert {r["concurrency"] for r in out["cells"]} == {2, 8}
    # 2 lies between the fitted loads; 8 beyond them
    assert {r["concurrency"]: r["extrapolation"] for r in out["cells"]} == {2: False, 8: True}
    # noise-free cells of the model the fit starts near: the held-out loads come back closely
    tok = [r for r in out["cells"] if r["metric"] == "output_tok_s"]
    assert len(tok) == 4 and max(abs(r["error_pct"]) for r in tok) < 1.0


@pytest.mark.parametrize(("held", "message"), [
    ([3], "no cells at load 3 (measured: 1,2,8)"),
    ([1, 2], "holding out 1,2 leaves 1 load(s) to fit on")])
def test_a_split_the_cells_cannot_make_is_refused(held, message):
    observed = [observe(c) for c in synthetic.cells(truth(), [1, 2, 8], noise=0.0)]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        holdout.split(Space.for_cells(start(), observed), observed, "baseline", held, 0)


def test_speedup_pairs_a_cell_with_the_baseline_of_its_own_output_length():
    short = synthetic.cells(truth(), [4], noise=0.0, output_tokens=32)
    long = synthetic.cells(truth(), [4], noise=0.0, output_tokens=96)
    long = [replace(c, cell_id=c.cell_id + "-long") for c in long]
    observed = [observe(c) for c in (*short, *long)]
    tok = {(o.cell.variant, o.scenario.output_tokens): o.cell.output_tok_s for o in observed}
    preds = [Prediction(output_tok_s=float(o.cell.output_tok_s or 0), ttft_p50_s=0.01,
                        tpot_p50_s=0.005, accept_length=3.0 if o.speculative else None,
                        acceptance_per_position=None, batch=4.0) for o in observed]
    speed = {r["cell_id"]: r["measured"] for r in holdout.rows(observed, preds, "baseline")
             if r["metric"] == "speedup"}
    assert speed == {"eagle3-c4": tok[("eagle3", 32.0)] / tok[("baseline", 32.0)],
                     "eagle3-c4-long": tok[("eagle3", 96.0)] / tok[("baseline", 96.0)]}


def test_a_split_by_workload_fits_on_one_output_length_and_predicts_the_other():
    short = synthetic.cells(truth(), [1, 8], noise=0.0, output_tokens=32)
    long = [replace(c, cell_id=c.cell_id + "-96", workload="coding96") for c in
            synthetic.cells(truth(), [1, 8], noise=0.0, output_tokens=96)]
    observed = [observe(c) for c in (*short, *long)]
    out = holdout.split(Space.for_cells(start(), observed), observed, "baseline", [], 0,
                        ["coding"])
    assert out["held_out_workloads"] == ["coding"] and out["fitted_workloads"] == ["coding96"]
    assert out["fitted_on"] == [1, 8]
    assert {r["cell_id"] for r in out["cells"]} == {c.cell_id for c in short}
    # 32 output tokens lie outside the fitted cells' 96: extrapolation, with both variants'
    # tok/s and the speedup at each load
    assert all(r["extrapolation"] for r in out["cells"])
    assert sorted(r["concurrency"] for r in out["cells"] if r["metric"] == "speedup") == [1, 8]
    # noise-free cells of the model the fit starts near: the other length comes back closely
    tok = [r for r in out["cells"] if r["metric"] == "output_tok_s"]
    assert max(abs(r["error_pct"]) for r in tok) < 2.0
