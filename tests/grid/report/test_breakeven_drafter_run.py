"""`python -m grid.report RUN --drafter-run OLD` on real Parquet (grid/report/__init__.py,
grid/report/breakeven.py): the earlier run's drafter placed on this run's curve, kept by a
plain re-render, and every refusal one line and exit 2 before the report is made."""

from __future__ import annotations

import json
import shutil

import pytest

from grid.report import main
from tests.grid.analysis.synthetic import write_run, write_speculative_cells


def _forced(length: float) -> dict:
    return {"forced_acceptance": json.dumps({"length": length, "mean_length": length})}


@pytest.fixture
def this(tmp_path):
    """Baseline 100 tok/s per stream at c=1, 50 at c=4; forced 1.5: 80 and 30; forced 3.5:
    120 and 55 (no jitter). Ratios at c=1 0.8 and 1.2: a* = 1.5 + 0.2 / 0.4 x 2 = 2.5; at
    c=4 0.6 and 1.1: a* = 1.5 + 0.4 / 0.5 x 2 = 3.1."""
    run = tmp_path / "this"
    write_run(run, {"baseline": {1: 100.0, 4: 50.0}}, jitter=0.0)
    for length, speeds in ((1.5, {1: 80.0, 4: 30.0}), (3.5, {1: 120.0, 4: 55.0})):
        write_run(run, {f"eagle3__forced_len-{length}": speeds}, jitter=0.0,
                  spec_accept=length, cell_fields=_forced(length))
    return run


def _old(tmp_path, cells):
    old = tmp_path / "old"
    write_speculative_cells(old, cells)
    return old


def test_the_earlier_runs_lengths_are_placed_and_kept_by_a_rerender(tmp_path, this, capsys):
    # 8 coding requests of 61 tokens in 20 verify steps: 60 / 20 = 3.0, above a* at c=1
    # (2.5), below at c=4 (3.1)
    old = _old(tmp_path, {"u1": ("eagle3", None, [("coding", 61, 20)] * 8)})
    assert main([str(this), "--drafter-run", str(old)]) == 0
    out = capsys.readouterr().out
    assert "    c=1: 2.50 [2.50, 2.50]" in out and "    c=4: 3.10 [3.10, 3.10]" in out
    line = ("    drafter on coding (run old): accept length 3.00 [3.00, 3.00] over 8 requests: "
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


@pytest.mark.parametrize(("cells", "message"), [
    (None, "is not a run folder (it holds no committed cells)"),
    ({"f1": ("eagle3__forced_len-2.0", 2.0, [("coding", 61, 30)])},
     "run old has no unforced speculative cell"),
    ({"a": ("eagle3a", None, [("coding", 61, 20)]), "b": ("eagle3b", None, [("coding", 61, 20)])},
     "drafter run old has no configuration 'eagle3' and several others (eagle3a, eagle3b)"),
])
def test_a_drafter_run_that_cannot_be_placed_is_one_line_and_exit_2(tmp_path, this, capsys,
                                                                     cells, message):
    old = _old(tmp_path, cells) if cells else tmp_path / "old"
    assert main([str(this), "--drafter-run", str(old)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specgrid: error: --drafter-run {old}: ")
    assert message in err[0]
    assert not (this / "decision.json").exists()  # refused before the report is made
