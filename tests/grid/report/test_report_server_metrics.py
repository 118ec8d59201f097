"""The report's server-side figures by role, whatever the engine calls its /metrics series: a run
whose server_metrics rows carry vLLM's names gets the same gauge figure and counter-derived
server tok/s and accept length as one with SGLang's (the family from the engine's declared
names, or detected from the scraped ones for a server someone else runs)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from grid.report import write_report
from grid.report.data import load_run
from grid.report.serverdata import unsampled
from grid.report.serverplots import server_metrics
from tests.grid.analysis.synthetic import write_run

SPEEDS = {"baseline": {1: 100.0, 4: 80.0}, "eagle3": {1: 140.0, 4: 90.0}}
NONE = "\u2013"
"""How the report shows a figure it has not got (an en dash)."""
FIRST, LAST = 1000.0, 1010.0
"""Every cell is scraped twice, 10 s apart (just before and just after its load)."""

# (name, labels, value at the first scrape, at the last). Two label sets on the gauges
# (tensor-parallel ranks, data-parallel engines): running 1 + 3 = 4 and queue 2 (then 0) add up,
# KV-cache use averages to (0.2 + 0.4) / 2 = 0.3. Generation tokens rise by 400 - 100 = 300,
# 30 tok/s over the 10 s.
VLLM = [("vllm:num_requests_running", {"engine": "0"}, 1.0, 1.0),
        ("vllm:num_requests_running", {"engine": "1"}, 3.0, 3.0),
        ("vllm:num_requests_waiting", {"engine": "0"}, 2.0, 0.0),
        ("vllm:kv_cache_usage_perc", {"engine": "0"}, 0.2, 0.2),
        ("vllm:kv_cache_usage_perc", {"engine": "1"}, 0.4, 0.4),
        ("vllm:generation_tokens_total", {}, 100.0, 400.0),
        # finished requests by reason: (8 - 0) + (7 - 5) = 10
        ("vllm:request_success_total", {"finished_reason": "length"}, 0.0, 8.0),
        ("vllm:request_success_total", {"finished_reason": "stop"}, 5.0, 7.0),
        ("vllm:time_to_first_token_seconds_count", {}, 0.0, 10.0)]  # read by nothing here
VLLM_SPEC = [("vllm:spec_decode_num_drafts_total", {}, 10.0, 30.0),  # 20 drafts
             ("vllm:spec_decode_num_accepted_tokens_total", {}, 0.0, 30.0)]  # 30 accepted
SGLANG = [("sglang:num_running_reqs", {"tp_rank": "0"}, 1.0, 1.0),
          ("sglang:num_running_reqs", {"tp_rank": "1"}, 3.0, 3.0),
          ("sglang:num_queue_reqs", {"tp_rank": "0"}, 2.0, 0.0),
          ("sglang:token_usage", {"tp_rank": "0"}, 0.2, 0.2),
          ("sglang:token_usage", {"tp_rank": "1"}, 0.4, 0.4),
          ("sglang:generation_tokens_total", {}, 100.0, 400.0),
          ("sglang:num_requests_total", {}, 5.0, 15.0)]  # 10 finished
SGLANG_SPEC = [("sglang:spec_verify_calls_total", {}, 0.0, 100.0)]  # 100 verify calls

# Each engine's own accept length, by hand from the counters above: vLLM's mean acceptance
# length over decode steps, 1 + 30 accepted / 20 drafts; SGLang's completion tokens per verify
# call, 300 / 100.
CASES = {"vllm": (VLLM, VLLM_SPEC, 1 + 30 / 20), "sglang": (SGLANG, SGLANG_SPEC, 300 / 100),
         "external": (VLLM, VLLM_SPEC, 1 + 30 / 20)}  # family detected from the names


def _rows(run_id: str, cell_id: str, series: list) -> list[dict]:
    return [{"run_id": run_id, "cell_id": cell_id, "attempt": 1, "scraped_at": t,
             "metric": name, "labels": json.dumps(labels, sort_keys=True), "value": value}
            for name, labels, first, last in series for t, value in ((FIRST, first),
                                                                     (LAST, last))]


def _write(run_dir, engine: str, plain: list, spec: list) -> None:
    metrics = {f"{variant}-c{c}": _rows(run_dir.name, f"{variant}-c{c}",
                                        plain + (spec if variant != "baseline" else []))
               for variant, by_c in SPEEDS.items() for c in by_c}
    write_run(run_dir, SPEEDS, server_metrics=metrics,
              cell_fields={"engine": engine, "simulated": False})


def _cells_table(page: str) -> list[dict[str, str]]:
    """The HTML cells table as one dict per row, keyed by column header."""
    section = page[page.index("<h2>Cells</h2>"):]
    table = section[section.index("<table>"):section.index("</table>")]
    head = re.findall(r"<th>([^<]*)</th>", table)
    return [dict(zip(head, re.findall(r"<td class=n>(.*?)</td>", row), strict=True))
            for row in re.findall(r"<tr>(<td.*?)</tr>", table)]


@pytest.mark.parametrize("engine", list(CASES))
def test_server_gauges_and_accept_length_whatever_the_engine_names_them(tmp_path, engine):
    plain, spec, accept = CASES[engine]
    run_dir = tmp_path / f"{engine}-run"
    _write(run_dir, engine, plain, spec)
    data = load_run(run_dir, replicates=50)

    deltas = data.server_deltas.set_index("cell_id")
    for cell_id in ("eagle3-c1", "eagle3-c4"):
        assert deltas.server_accept_length[cell_id] == pytest.approx(accept)
        assert deltas.server_tok_s[cell_id] == pytest.approx(300 / 10)
        assert deltas.requests_finished[cell_id] == pytest.approx(10)
    assert deltas.server_accept_length[["baseline-c1", "baseline-c4"]].isna().all()
    assert set(deltas.family) == {"sglang" if engine == "sglang" else "vllm"}

    gauges = data.server_gauges
    one = gauges[gauges.cell_id == "eagle3-c4"].set_index(["role", "scraped_at"]).value
    assert one[("running", FIRST)] == 4.0 and one[("running", LAST)] == 4.0
    assert one[("waiting", FIRST)] == 2.0 and one[("waiting", LAST)] == 0.0
    assert one[("kv_usage", FIRST)] == pytest.approx(0.3)

    figure = server_metrics(data)
    assert figure is not None
    assert [ax.get_ylabel() for ax in figure.axes] == ["running batch", "queue", "KV cache usage"]
    # one line per cell in every panel
    assert [len(ax.collections[0].get_segments()) for ax in figure.axes] == [4, 4, 4]

    report = write_report(run_dir, data=data)
    assert (run_dir / "plots" / "server_metrics.png") in report.plots
    page = report.html.read_text()
    family = "sglang" if engine == "sglang" else "vllm"
    assert f"read by engine family: {family}" in page
    shown = {(r["variant"], r["load"]): r for r in _cells_table(page)}
    assert shown[("eagle3", "c=4")]["server accept"] == f"{accept:.2f}"
    assert shown[("eagle3", "c=4")]["server tok/s"] == "30.0"
    assert shown[("baseline", "c=1")]["server accept"] == NONE


def test_a_server_of_no_known_family_has_no_server_figures(tmp_path):
    run_dir = tmp_path / "unknown-run"
    tgi = [("tgi_queue_size", {}, 2.0, 0.0), ("tgi_request_count_total", {}, 0.0, 10.0)]
    _write(run_dir, "external", tgi, [])
    data = load_run(run_dir, replicates=50)
    assert data.server_deltas.empty and data.server_gauges.empty
    assert server_metrics(data) is None
    page = write_report(run_dir, data=data).html.read_text()
    assert "read by engine family: none known" in page
    assert {r["server accept"] for r in _cells_table(page)} == {NONE}


def test_a_rate_driven_simulated_cell_is_checked_at_its_running_batch(tmp_path):
    """The calibrated-envelope check (grid/report/validity.py) of a cell driven by a request
    rate, which has no concurrency of its own, reads it off the running-batch gauge."""
    version = ("sim 0.5.23-sim (specgrid 0.1.0), profile default on rtx-pro-6000 / "
               "kimi-k2.5-class@000000000000")
    run_dir = tmp_path / "rate-run"
    # two data-parallel ranks run 60 + 40 = 100 requests: above the anchor's 1-64
    running = [("sglang:num_running_reqs", {"dp_rank": "0"}, 60.0, 60.0),
               ("sglang:num_running_reqs", {"dp_rank": "1"}, 40.0, 40.0)]
    write_run(run_dir, {"baseline": {1: 100.0}},
              server_metrics={"baseline-c1": _rows(run_dir.name, "baseline-c1", running)},
              cell_fields={"engine_version": version, "concurrency": None, "rate": 2.0,
                           "server_command": "python -m engines.sim",
                           "engine_options": "{}", "server_args": "{}"})
    data = load_run(run_dir, replicates=20)
    (warning,) = [t for _, t in data.validity if t.startswith("extrapolation")]
    assert "baseline on coding at 2/s (concurrency 100 outside 1-64" in warning


def test_a_cell_never_scraped_inside_its_load_is_named_not_drawn_flat(tmp_path):
    """A short cell between two scrapes (a vLLM cell at c=4 lasts about 1 s): its gauges show
    the idle server before and after the load, so the figure says so instead of drawing them."""
    run_dir = tmp_path / "short-cells"
    metrics = {f"{variant}-c{c}": _rows(run_dir.name, f"{variant}-c{c}", VLLM)
               for variant, by_c in SPEEDS.items() for c in by_c}
    # baseline c=4's load starts at 1000 s (tests/grid/analysis/synthetic.py); its scrapes at
    # 990 and 995 s both fall before it
    before = {FIRST: 990.0, LAST: 995.0}
    metrics["baseline-c4"] = [dict(r, scraped_at=before[r["scraped_at"]])
                              for r in metrics["baseline-c4"]]
    assert sorted({r["scraped_at"] for r in metrics["baseline-c4"]}) == [990.0, 995.0]
    write_run(run_dir, SPEEDS, server_metrics=metrics,
              cell_fields={"engine": "vllm", "simulated": False})
    data = load_run(run_dir, replicates=20)
    assert unsampled(data.server_gauges, data.requests) == ["baseline-c4"]
    figure = server_metrics(data)
    assert figure is not None
    for ax in figure.axes:
        assert [len(ax.collections[0].get_segments())] == [3]  # the other three cells
        (note,) = [t.get_text() for t in ax.texts]
        assert note == "no sample inside the load window: baseline c=4 (not drawn)"


def test_unsampled_reads_each_cells_own_load_window():
    requests = pd.DataFrame({"cell_id": ["a", "a", "b"], "sent_at": [10.0, 10.5, 20.0],
                             "e2e_s": [0.4, 0.5, 1.0]})  # a: 10.0-11.0, b: 20.0-21.0
    gauges = pd.DataFrame({"cell_id": ["a", "a", "b", "c"], "role": "running",
                           "scraped_at": [9.5, 11.8, 20.5, 30.0], "value": 0.0})
    # c has no request timings: not judged
    assert unsampled(gauges, requests) == ["a"]
