"""An earlier run's drafter lengths (grid/analysis/drafter_run.py): which of its cells measure
them, which of its configurations is meant, and the lengths placed on this run's hand-worked
curve (tests/grid/analysis/test_breakeven.py: a* = 1.83 [1.67, 2.01] at c=1, 3.00 [2.76,
3.26] at c=8)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from grid.analysis.breakeven import curves
from grid.analysis.drafter_run import (
    DrafterRun,
    drafter_run,
    placed_from,
    speculative_configurations,
)
from tests.grid.analysis.test_breakeven import surface


def _cell(cell_id: str, variant: str, length: float | None = None, steps: int = 3) -> dict:
    """A cell served at speculative depth `steps` (its `server_args`)."""
    forced = None if length is None else json.dumps({"length": length, "mean_length": length})
    args = {} if variant == "baseline" else {"speculative_algorithm": "EAGLE3",
                                             "speculative_num_steps": steps}
    return {"cell_id": cell_id, "variant": variant, "forced_acceptance": forced,
            "server_args": json.dumps(args)}


def _request(cell_id: str, domain: str, output_tokens: int, steps: int | None,
             workload: str = "coding", status: str = "ok") -> dict:
    return {"cell_id": cell_id, "workload": workload, "status": status, "domain": domain,
            "output_tokens": output_tokens, "spec_verify_ct": steps}


def earlier() -> tuple[pd.DataFrame, pd.DataFrame]:
    """An earlier run: the baseline (no verify steps), eagle3 unforced on two workloads and
    eagle3 forced at 3.5 (its requests must not count)."""
    cells = pd.DataFrame([_cell("b", "baseline"), _cell("u1", "eagle3"),
                          _cell("u2", "eagle3"), _cell("f", "eagle3__forced_len-3.5", 3.5)])
    requests = pd.DataFrame(
        # coding: one request of 61 tokens in 24 steps (60 / 24 = 2.5), one of 41 in 8
        # (40 / 8 = 5) on another workload: pooled 100 / 32 = 3.125
        [_request("u1", "coding", 61, 24), _request("u2", "coding", 41, 8, workload="chat"),
         # chat prompts: 31 tokens in 20 steps, twice: 1.5
         _request("u1", "chat", 31, 20), _request("u1", "chat", 31, 20),
         _request("u1", "chat", 5, 1, status="error"),  # an error: left out
         _request("f", "coding", 61, 15), _request("b", "coding", 61, None)])
    return cells, requests


def test_the_unforced_speculative_cells_measure_the_drafter_over_every_workload():
    cells, requests = earlier()
    assert speculative_configurations(requests, cells) == ["eagle3"]
    run = drafter_run("old", requests, cells)
    assert list(run.lengths) == ["eagle3"]
    n, length, lo, hi = run.lengths["eagle3"]["coding"]
    assert (n, length) == (2, pytest.approx(100 / 32))
    # two requests resampled: a quarter of the replicates hold the first twice (2.5), a
    # quarter the second twice (5.0): the 2.5 and 97.5 percentiles are those two
    assert (lo, hi) == pytest.approx((2.5, 5.0))
    assert run.lengths["eagle3"]["chat"] == (2, pytest.approx(1.5), pytest.approx(1.5),
                                             pytest.approx(1.5))


def test_a_run_without_an_unforced_speculative_cell_is_one_line():
    cells, requests = earlier()
    only_forced = requests[requests.cell_id.isin(["f", "b"])]
    with pytest.raises(ValueError, match="run old has no unforced speculative cell"):
        drafter_run("old", only_forced, cells)


def test_the_configuration_meant_is_the_same_label_else_the_only_one():
    lengths = {"coding": (4, 2.5, 2.5, 2.5)}
    two = DrafterRun("old", {"eagle3": lengths, "eagle3__speculative_num_steps-5": lengths})
    assert two.pick("eagle3", None) == "eagle3"
    assert DrafterRun("old", {"eagle3": lengths}).pick("eagle3__off_above-8", 3) == "eagle3"
    with pytest.raises(ValueError) as e:
        two.pick("eagle3__off_above-8", None)
    assert str(e.value) == (
        "drafter run old has no configuration 'eagle3__off_above-8' and several others "
        "(eagle3, eagle3__speculative_num_steps-5): which drafter is meant is not clear; give "
        "a run with that configuration or only one")


def test_the_earlier_lengths_are_placed_on_this_runs_curve_labelled_with_its_run():
    stats, cells = surface()
    old_cells, old_requests = earlier()
    placed = {d.domain: d for d in placed_from(curves(stats, cells),
                                              drafter_run("old", old_requests, old_cells))}
    coding, chat = placed["coding"], placed["chat"]
    assert coding.source_run == "old" and coding.name == "coding (run old)"
    # 3.125 clears a* at c=1 (1.83) and at c=8 (3.00); its lower end 2.5 clears c=1's upper
    # end (2.01) only; its upper end 5.0 clears both lower ends
    assert (coding.pays_up_to, coding.surely_up_to, coding.maybe_up_to) == (8.0, 1.0, 8.0)
    # 1.5 is below a* everywhere, and its interval is the point
    assert (chat.pays_up_to, chat.surely_up_to, chat.maybe_up_to) == (None, None, None)
    assert coding.as_json()["source_run"] == "old"
    assert coding.describe().startswith("coding (run old): accept length 3.12 [2.50, 5.00] "
                                        "over 2 requests: pays up to c=8 [c=1, c=8]")


def test_a_curve_without_a_clear_counterpart_in_the_earlier_run_is_refused():
    stats, cells = surface()
    lengths = {"coding": (4, 2.5, 2.5, 2.5)}
    run = DrafterRun("old", {"eagle3a": lengths, "eagle3b": lengths})
    with pytest.raises(ValueError, match=r"several others \(eagle3a, eagle3b\)"):
        placed_from(curves(stats, cells), run)


def test_a_drafter_measured_at_another_depth_is_refused_naming_both():
    cells, requests = earlier()
    run = drafter_run("old", requests, cells)
    assert run.depths == {"eagle3": 3}  # the unforced cells' speculative_num_steps
    assert run.pick("eagle3", 3) == "eagle3" and run.pick("eagle3", None) == "eagle3"
    # the only configuration is no stand-in at another depth
    with pytest.raises(ValueError) as e:
        run.pick("eagle3__speculative_num_steps-7", 7)
    assert str(e.value) == (
        "drafter run old measured eagle3 at depth 3 (speculative_num_steps), "
        "eagle3__speculative_num_steps-7 here is at depth 7: an accept length does not carry "
        "over to another depth; give a run measured at depth 7")
    # this run's curve records its depth (the forced cells' server_args): placing refuses
    stats, here = surface()
    here["server_args"] = json.dumps({"speculative_algorithm": "EAGLE3",
                                      "speculative_num_steps": 7})
    with pytest.raises(ValueError, match="measured eagle3 at depth 3"):
        placed_from(curves(stats, here), run)
