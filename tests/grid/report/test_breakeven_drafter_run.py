"""`python -m grid.report RUN --drafter-run OLD` on real Parquet (grid/report/__init__.py,
grid/report/breakeven.py): the earlier run's drafter placed on this run's curve, kept by a
plain re-render, and every refusal one line and exit 2 before the report is made."""

from __future__ import annotations

import json
import shutil

import pytest

from grid.report import main
from tests.grid.analysis.synthetic import write_run, write_speculative_cells

STEPS = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}
"""The depth this run's forced cells record (their `server_args`)."""


def _forced(length: float) -> dict:
    """A forced cell's columns: forced to `length`, measured at it (honoured), depth 3."""
    return {"forced_acceptance": json.dumps({"length": length, "mean_length": length}),
            "accept_length_decode": length, "server_args": json.dumps(STEPS)}


@pytest.fixture
def this(tmp_path):
    """Baseline 100 tok/s per stream at c=1, 50 at c=4; forced 1.5: 80 and 30; forced 4.5:
    120 and 55 (no jitter). Each request makes 100 tokens: 99 decode tokens in 66 verify
    steps is 1.5, in 22 steps 4.5 (what the cells measured). Ratios at c=1 0.8 and 1.2:
    a* = 1.5 + 0.2 / 0.4 x 3 = 3.0; at c=4 0.6 and 1.1: a* = 1.5 + 0.4 / 0.5 x 3 = 3.9."""
    run = tmp_path / "this"
    write_run(run, {"baseline": {1: 100.0, 4: 50.0}}, jitter=0.0)
    for length, steps, speeds in ((1.5, 66, {1: 80.0, 4: 30.0}), (4.5, 22, {1: 120.0, 4: 55.0})):
        write_run(run, {f"eagle3__forced_len-{length}": speeds}, jitter=0.0,
                  spec_accept=100 / steps, cell_fields=_forced(length))
    return run


def _old(tmp_path, cells):
    old = tmp_path / "old"
    write_speculative_cells(old, cells)
    return old


@pytest.mark.slow
def test_the_earlier_runs_lengths_are_placed_and_kept_by_a_rerender(tmp_path, this, capsys):
    # 8 coding requests of 61 tokens in 18 verify steps: 60 / 18 = 3.33, above a* at c=1
    # (3.0), below at c=4 (3.9)
    old = _old(tmp_path, {"u1": ("eagle3", None, [("coding", 61, 18)] * 8)})
    assert main([str(this), "--drafter-run", str(old)]) == 0
    out = capsys.readouterr().out
    assert "    c=1: 3.00 [3.00, 3.00]" in out and "    c=4: 3.90 [3.90, 3.90]" in out
    line = ("    drafter on coding (run old): accept length 3.33 [3.33, 3.33] over 8 requests: "
            "pays up to c=1 [c=1, c=1]")
    assert line in out
    saved = json.loads((this / "decision.json").read_text())["breakeven"]
    assert saved["drafter_run"] == {"run": "old", "path": str(old.resolve())}
    assert main([str(this)]) == 0  # a plain re-render places it again
    assert line in capsys.readouterr().out
    shutil.rmtree(old)  # ... or says why it no longer can
    assert main([str(this)]) == 0
    assert (f"  drafter run not placed: the drafter run the last report placed: "
            f"{old.resolve()} is not a run folder") in capsys.readouterr().out


@pytest.mark.parametrize(("cells", "depth", "message"), [
    (None, 3, "is not a run folder (it holds no committed cells)"),
    ({"f1": ("eagle3__forced_len-2.0", 2.0, [("coding", 61, 30)])}, 3,
     "run old has no unforced speculative cell"),
    ({"a": ("eagle3a", None, [("coding", 61, 20)]), "b": ("eagle3b", None, [("coding", 61, 20)])},
     3, "drafter run old has no configuration 'eagle3' and several others (eagle3a, eagle3b)"),
    # the same configuration, measured at depth 7 where this run's curve is at depth 3
    ({"u": ("eagle3", None, [("coding", 61, 20)])}, 7,
     "drafter run old measured eagle3 at depth 7 (speculative_num_steps), eagle3 here is at "
     "depth 3: an accept length does not carry over to another depth"),
])
def test_a_drafter_run_that_cannot_be_placed_is_one_line_and_exit_2(tmp_path, this, capsys,
                                                                     cells, depth, message):
    old = tmp_path / "old"
    if cells:
        write_speculative_cells(old, cells, cell_fields={"server_args": json.dumps(
            {**STEPS, "speculative_num_steps": depth})})
    assert main([str(this), "--drafter-run", str(old)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specgrid: error: --drafter-run {old}: ")
    assert message in err[0]
    assert not (this / "decision.json").exists()  # refused before the report is made
