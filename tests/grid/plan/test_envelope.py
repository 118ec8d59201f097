"""Simulated cells outside their profile's calibrated envelope are marked extrapolation: in
the plan (grid/plan/checks.py sim_envelope, envelope_warnings) and in the report
(grid/report/data.py validity)."""

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
EAGLE = ("python -m engines.sim --max-running-requests 64 --speculative-algorithm EAGLE3 "
         "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


def _write_run(run_dir, concurrencies, tokens=256, prompt=128):
    """A simulated run of the default profile: baseline and eagle3 at each concurrency."""
    from grid.store.results import write_cell
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
                        server_command=EAGLE if variant == "eagle3"
                        else "python -m engines.sim --max-running-requests 64")
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
    assert "baseline c=128 coding (concurrency 128 outside 1-64)" in warning
    assert "eagle3 c=128 coding (concurrency 128 outside 1-64)" in warning
    assert "c=1 " not in warning


def test_the_report_flags_output_and_prompt_lengths(tmp_path):
    run = tmp_path / "short"
    _write_run(run, [1], tokens=64, prompt=30)
    (warning,) = _report_extrapolation(run)
    assert "2 simulated cell(s)" in warning
    assert "64 output tokens outside 256" in warning and "prompts of 30 tokens" in warning


def test_a_report_inside_the_envelope_has_no_extrapolation_warning(tmp_path):
    run = tmp_path / "inside"
    _write_run(run, [1, 64])
    assert _report_extrapolation(run) == []
