"""Simulated cells outside their profile's calibrated envelope are marked extrapolation: in
the plan (grid/plan/checks.py cell_envelope, envelope_warnings) and in the report
(grid/report/validity.py), both asking the engine (engines/sim/envelope.py) once per cell."""

from __future__ import annotations

import json

import pytest

from grid.plan.build import format_plan
from grid.run import make_plan
from tests.grid.analysis.synthetic import cell_requests

INSIDE = ["+sweep=smoke", "workload.max_new_tokens=256", "workload.input_tokens=[128,128]",
          "workload.input_shaping=fit"]
"""The default anchor's scenario: coding prompts of 128 tokens, 256 output tokens."""


def _extrapolation(plan) -> list[str]:
    return [w for w in plan.warnings if w.startswith("extrapolation")]


@pytest.mark.parametrize("concurrency", ["[1,64]", "[4]"])
def test_a_sweep_inside_the_envelope_gets_no_extrapolation_warning(tmp_path, concurrency):
    plan = make_plan([*INSIDE, f"grid.axes.concurrency={concurrency}",
                      f"results_dir={tmp_path}"]).plan
    assert _extrapolation(plan) == []
    assert "extrapolation" not in format_plan(plan)


def test_a_sweep_beyond_the_envelope_is_marked_per_group_and_cell(tmp_path):
    plan = make_plan([*INSIDE, "grid.axes.concurrency=[1,128]", f"results_dir={tmp_path}"]).plan
    warnings = _extrapolation(plan)
    assert len(warnings) == 2  # one per server group: baseline, eagle3
    for group, warning in zip(plan.groups, warnings, strict=True):
        # the c=128 cell alone, with its reason (the c=1 cell is inside)
        assert f"1 cell(s) of server {group.variant} (c=128: concurrency 128 outside 1-64)" \
            in warning
    text = format_plan(plan)
    marked = [line for line in text.splitlines() if "[SIMULATION, extrapolation" in line]
    assert len(marked) == 2 and all("c=128" in line for line in marked)


def test_shipped_smoke_sweep_and_the_h100_chat_case_are_extrapolation(tmp_path):
    smoke = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"]).plan
    assert all("16 output tokens outside 256" in w for w in _extrapolation(smoke))
    assert len(_extrapolation(smoke)) == 2
    h100 = make_plan(["+sweep=smoke", "model=llama3.1-8b", "hardware=h100",
                      "grid.axes.workload=[chat]", "workload.max_new_tokens=256",
                      "workload.input_tokens=[128,128]", "workload.input_shaping=fit",
                      f"results_dir={tmp_path}"]).plan
    warnings = _extrapolation(h100)
    assert len(warnings) == 2 and all("256 output tokens outside 512" in w for w in warnings)
    at_512 = make_plan(["+sweep=smoke", "model=llama3.1-8b", "hardware=h100",
                        "grid.axes.workload=[chat]", "workload.max_new_tokens=512",
                        "workload.input_tokens=[128,128]", "workload.input_shaping=fit",
                        f"results_dir={tmp_path}"]).plan
    assert _extrapolation(at_512) == []


def test_an_unanchored_pair_is_extrapolation_everywhere(tmp_path):
    plan = make_plan([*INSIDE, "model=llama3.1-8b", "hardware=h200",
                      f"results_dir={tmp_path}"]).plan
    warnings = _extrapolation(plan)
    assert len(warnings) == 2 and all("no anchor covers h200 / llama3.1-8b" in w
                                      for w in warnings)


VERSION = ("sim 0.5.23-sim (specgrid 0.1.0), profile default on rtx-pro-6000 / "
           "kimi-k2.5-class@000000000000")
OPTIONS = {"profile": "default", "hardware": "rtx-pro-6000", "model": "kimi-k2.5-class"}
"""The engine options a simulated cell of the default profile records."""
BASELINE_ARGS = {"max_running_requests": 64}
EAGLE_ARGS = {**BASELINE_ARGS, "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def _write_run(run_dir, concurrencies, tokens=256, prompt=128, cell_schema=None):
    """A simulated run of the default profile: baseline and eagle3 at each concurrency (the
    cell rows written with `cell_schema` when given: an older file's columns)."""
    import pyarrow as pa

    from grid.store.results import commit_attempt, request_table, write_cell
    from grid.store.schema import CELL_FIELDS, REQUEST_FIELDS

    for variant in ("baseline", "eagle3"):
        for c in concurrencies:
            cid = f"{variant}-c{c}"
            req = cell_requests(cid, c, 20.0, per_stream=4, tokens=tokens)
            rows = []
            for r in req.to_dict("records"):
                row = {k: r.get(k) for k in REQUEST_FIELDS.names}
                row.update(run_id=run_dir.name, attempt=1, engine="sim", simulated=True,
                           input_tokens=prompt, itl_s=[], rate=None, variant=variant,
                           workload="coding", concurrency=c,
                           spec_verify_ct=None if variant == "baseline" else tokens // 3)
                rows.append(row)
            cell = dict.fromkeys(CELL_FIELDS.names)
            cell.update(run_id=run_dir.name, cell_id=cid, server_key=variant, attempt=1,
                        status="done", engine="sim", simulated=True, model="kimi-k2.5-class",
                        concurrency=c, num_requests=len(rows), requests_error=0,
                        error_rate=0.0, client_saturated=False,
                        factors=json.dumps({"concurrency": c}), engine_version=VERSION,
                        engine_options=json.dumps(OPTIONS),
                        server_args=json.dumps(EAGLE_ARGS if variant == "eagle3"
                                               else BASELINE_ARGS))
            if cell_schema is not None:
                commit_attempt(run_dir, variant, "coding", cid, 1, {
                    "requests": request_table(rows),
                    "cells": pa.Table.from_pylist([{k: cell[k] for k in cell_schema.names}],
                                                  schema=cell_schema)})
                continue
            write_cell(run_dir, variant=variant, workload="coding", cell_id=cid, attempt=1,
                       requests=rows, cell_row=cell)


def _report_extrapolation(run_dir) -> list[str]:
    from grid.report.data import load_run

    data = load_run(run_dir, replicates=50)
    return [t for level, t in data.validity if level == "warning"
            and t.startswith("extrapolation")]


def test_the_report_lists_cells_outside_the_envelope(tmp_path):
    run = tmp_path / "beyond"
    _write_run(run, [1, 128])
    (warning,) = _report_extrapolation(run)
    assert "2 simulated cell(s)" in warning
    # each server named once, the shared reason once
    assert warning.endswith(": baseline on coding at c=128; eagle3 on coding at c=128 "
                            "(concurrency 128 outside 1-64)")
    assert "c=1 " not in warning and "c=1," not in warning


def test_the_report_flags_output_and_prompt_lengths(tmp_path):
    run = tmp_path / "short"
    _write_run(run, [1, 4], tokens=64, prompt=20)
    (warning,) = _report_extrapolation(run)
    assert "4 simulated cell(s)" in warning
    assert "64 output tokens outside 256" in warning and "prompts of 20 tokens" in warning
    # each server named once with its loads, the reasons they share said once
    assert warning.count("64 output tokens outside 256") == 1
    assert "baseline on coding at c=1,4; eagle3 on coding at c=1,4 (" in warning


def test_a_report_inside_the_envelope_has_no_extrapolation_warning(tmp_path):
    run = tmp_path / "inside"
    _write_run(run, [1, 64])
    assert _report_extrapolation(run) == []


def _record(run_dir, work, prompt=128, tokens=256):
    """A planned cell as the run records it: its cell row from grid/store/rows.py (the
    columns the controller writes) and requests of `prompt` / `tokens` tokens."""
    from grid.store.results import write_cell
    from grid.store.rows import ServerFacts, cell_row
    from grid.store.schema import REQUEST_FIELDS

    cell = work.cell
    concurrency = int(cell.concurrency)
    req = cell_requests(cell.cell_id, concurrency, 20.0, per_stream=4, tokens=tokens)
    rows = []
    for r in req.to_dict("records"):
        row = {k: r.get(k) for k in REQUEST_FIELDS.names}
        row.update(run_id=run_dir.name, attempt=1, engine="sim", simulated=True,
                   input_tokens=prompt, itl_s=[], rate=None, concurrency=concurrency)
        rows.append(row)
    row = cell_row(run_dir.name, work, 1, status="done", error=None, started=1000.0,
                   finished=1010.0, server=ServerFacts())
    row.update(num_requests=len(rows), requests_error=0, error_rate=0.0,
               client_saturated=False)
    write_cell(run_dir, variant=cell.variant, workload=cell.workload, cell_id=cell.cell_id,
               attempt=1, requests=rows, cell_row=row)


def test_the_plan_and_the_report_give_one_answer_per_cell(tmp_path):
    """The envelope is computed once (engines/sim/envelope.py): the plan asks it of each
    cell's config, the report of what the same cell recorded (its engine options and variant
    args as columns), and they agree on a cell inside (c=1) and a cell outside (c=128)."""
    from grid.plan.checks import cell_envelope

    plan = make_plan([*INSIDE, "grid.axes.concurrency=[1,128]", f"results_dir={tmp_path}"]).plan
    expected = {1: (), 128: ("concurrency 128 outside 1-64",)}  # the default anchor's 1-64
    planned = {}
    for cell in plan.cells:
        found = cell_envelope(cell, plan.prompts[cell.workload_name])
        assert found is not None
        planned[cell.variant, cell.concurrency] = found.outside
    assert planned == {(v, c): why for v in ("baseline", "eagle3") for c, why in expected.items()}
    run = tmp_path / "recorded"
    for cell in plan.cells:
        _record(run, plan.work(cell))
    (warning,) = _report_extrapolation(run)
    assert "2 simulated cell(s)" in warning
    assert warning.endswith(": baseline on coding at c=128; eagle3 on coding at c=128 "
                            "(concurrency 128 outside 1-64)")


@pytest.mark.parametrize("setting", ["speculative_depth=[[1,3],[9,1]]",
                                     "speculative_adaptive=true"])
def test_a_depth_by_batch_is_outside_in_the_plan_and_the_report(tmp_path, setting):
    """A depth schedule and the engine's own adaptation switch the depth by batch, which no
    anchor measured: the plan says so from the variant, the report from the cell's
    speculative_depth / speculative_adaptive columns, in the same words."""
    from grid.plan.checks import cell_envelope

    key = setting.split("=")[0]
    why = f"{key} (no anchor measured the adaptive switch)"
    plan = make_plan([*INSIDE, "grid.axes.variant=[eagle3]", "grid.axes.concurrency=[4]",
                      f"variant.{setting}", f"results_dir={tmp_path}"]).plan
    (cell,) = plan.cells
    found = cell_envelope(cell, plan.prompts[cell.workload_name])
    assert found is not None and found.outside == (why,)
    run = tmp_path / "recorded"
    _record(run, plan.work(cell))
    (warning,) = _report_extrapolation(run)
    assert "1 simulated cell(s)" in warning and f"eagle3 on coding at c=4 ({why})" in warning


def test_a_run_folder_from_before_the_recorded_options_is_read_and_not_judged(tmp_path):
    """Cells written without the engine_options / server_args / threshold / depth columns (an
    older run folder): they load as null, and the report leaves their envelope unknown instead of
    failing."""
    import pyarrow as pa

    from grid.store.loader import load_cells
    from grid.store.schema import CELL_FIELDS

    newer = ("engine_options", "server_args", "speculative_disable_above_batch",
             "speculative_depth", "speculative_adaptive")
    older = pa.schema([f for f in CELL_FIELDS if f.name not in newer])
    run = tmp_path / "older"
    _write_run(run, [1, 128], cell_schema=older)  # c=128 is outside, had it been recorded
    cells = load_cells(run)
    assert len(cells) == 4 and cells[list(newer)].isna().all().all()
    assert _report_extrapolation(run) == []
