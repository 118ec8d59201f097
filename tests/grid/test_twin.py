"""`python -m grid.twin RUN`: reads the run's committed cells, writes twin.json into the run
folder and prints every cell's fit; bad input is one line and exit 2."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engines.sim.profile import load_profile
from engines.sim.twin import synthetic
from grid.twin import TWIN_FILE, main
from tests.engines.sim.twin.ground_truth import truth
from tests.grid.twin_run import write_run


def assert_bad_input(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specgrid: error: "), err
    assert message in err[0]


def test_the_twin_of_a_run_is_written_beside_it_and_printed(tmp_path, capsys):
    run = tmp_path / "RUN1"
    cells = synthetic.cells(truth(), [1, 64], noise=0.01)
    # a threshold variant (speculation switched off by batch size) is not modelled: left out
    threshold = replace(cells[-1], cell_id="off-above-8", variant="eagle3__off_above-8",
                        server_command="python -m engines.sim --speculative-adaptive")
    write_run(run, [*cells, threshold])
    # hardware and model: from the simulator's cells' engine version (h200 / llama3.1-8b)
    assert main([str(run), "--start", "default", "--replicates", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATION (twin of RUN1): the simulator fitted to 4 cells")
    assert "left out: off-above-8 eagle3__off_above-8 coding: speculation switched by batch" \
        in out
    for cell in cells:  # every cell's fit is printed
        assert sum(cell.cell_id in line for line in out.splitlines()) >= 3
    doc = json.loads((run / TWIN_FILE).read_text())
    assert doc["twin"]["run_id"] == "RUN1"
    assert sorted(doc["twin"]["cells"]) == sorted(c.cell_id for c in cells)
    assert set(doc["twin"]["holdout"]["loads"]) == {1, 64}
    assert "twin" in load_profile(str(run / TWIN_FILE), "h200", "llama3.1-8b").data
    assert not list(run.glob(".*.tmp"))  # written through a temporary file, renamed


def test_no_such_run_is_bad_input(tmp_path, capsys):
    assert_bad_input([str(tmp_path / "nosuch")], "is not a run folder with committed cells", capsys)


def test_a_run_without_done_cells_is_bad_input(tmp_path, capsys):
    run = tmp_path / "RUN2"
    write_run(run, synthetic.cells(truth(), [1, 64], noise=0.0), status="failed")
    assert_bad_input([str(run)], "has no done closed-loop cells to fit a twin to", capsys)
    assert not (run / TWIN_FILE).exists()


def test_a_run_at_one_load_is_bad_input(tmp_path, capsys):
    run = tmp_path / "RUN3"
    write_run(run, synthetic.cells(truth(), [8], noise=0.0))
    assert_bad_input([str(run)], "cells at one load only (c=8)", capsys)


@pytest.mark.parametrize(("flag", "message"), [
    (["--hardware", "tpu9"], "name the node's hardware profile with --hardware (one of cpu, "
                             "h100, h200, rtx-pro-6000), not 'tpu9'"),
    (["--model", "nosuch"], "name the served model's profile (one of kimi-k2.5-class, "
                            "kimi-k2.5-class-flat, llama3.1-8b, llama3.3-70b, qwen3-30b-a3b) "
                            "or its folder with --model; 'nosuch' is neither"),
    (["--model", "no/such/folder"], "no config.json at no/such/folder"),
    (["--holdout", "2"], "--holdout 2: no cells at load 2 (measured: 1,8)"),
    (["--engine", "vllm"], "--engine vllm: no cells of it (the run's: sim)"),
    (["--variants", "baseline,eagle9"], "--variants: no cells of eagle9 (the run's: baseline, "
                                        "eagle3)"),
    (["--holdout", "1"], "holding out 1 leaves 1 load(s) to fit on; a twin needs two or more"),
    (["--holdout-workloads", "chat"], "--holdout-workloads: no cells of chat (the run's: "
                                      "coding)"),
    (["--holdout-workloads", "coding"], "holding out coding leaves 0 load(s) to fit on"),
    (["--start", "nosuch"], "simulator profile 'nosuch' not found")])
def test_an_unknown_profile_is_bad_input(tmp_path, capsys, flag, message):
    run = tmp_path / "RUN4"
    write_run(run, synthetic.cells(truth(), [1, 8], noise=0.0))
    assert_bad_input([str(run), *flag], message, capsys)


def test_variants_choose_the_cells_fitted_and_the_holdout_split_is_printed(tmp_path, capsys):
    run = tmp_path / "RUN5"
    write_run(run, synthetic.cells(truth(), [1, 2, 8], noise=0.0))
    assert main([str(run), "--variants", "baseline", "--holdout", "2", "--replicates",
                 "2"]) == 0
    out = capsys.readouterr().out
    assert "left out: eagle3-c1 eagle3 coding: not chosen (--engine, --variants)" in out
    assert "held-out loads 2 predicted from a fit on loads 1, 8 of coding:" in out
    doc = json.loads((run / TWIN_FILE).read_text())
    assert sorted(doc["twin"]["cells"]) == ["baseline-c1", "baseline-c2", "baseline-c8"]
    split = doc["twin"]["holdout_split"]
    assert split["held_out"] == [2] and split["fitted_on"] == [1, 8]
    assert {r["cell_id"] for r in split["cells"]} == {"baseline-c2"}
    # the twin written is the one fitted without the held-out load: what it serves later is
    # out of sample there
    assert doc["twin"]["fitted_on"] == ["baseline-c1", "baseline-c8"]
