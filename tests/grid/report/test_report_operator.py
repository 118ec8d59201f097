"""The operator's view in the report: the GPUs each cell recorded, the capacity / frontier /
cost section of the HTML with its figure, the terminal lines, decision.json, the saved price
and the loader's functions."""

from __future__ import annotations

import base64
import json
import re

import pandas as pd
import pytest

from grid.analysis import Slo
from grid.loader import capacity, pareto
from grid.report import main, write_report
from grid.report.data import load_run
from grid.report.operator import cell_gpus
from tests.grid.analysis.synthetic import write_run
from tests.grid.report.test_report import SPEEDS

SIM_INFO = json.dumps({"sim": {"hardware": {"tp": 8}}})
"""What the simulator's /server_info says of a profile that models an 8-GPU node."""


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "operator-run"
    # 12 requests a stream: enough in c=4's steady window to show 90 % (36 needed)
    write_run(path, SPEEDS, cell_fields={"server_info": SIM_INFO}, per_stream=12)
    return path


def test_gpus_per_cell_from_what_each_cell_recorded():
    cells = pd.DataFrame([
        {"cell_id": "sim", "engine": "sim", "simulated": True, "server_info": SIM_INFO,
         "gpu_ids": "0"},
        {"cell_id": "gpu", "engine": "sglang", "simulated": False, "server_info": "{}",
         "gpu_ids": "0,1,2,3"},
        {"cell_id": "external", "engine": "external", "simulated": False, "server_info": None,
         "gpu_ids": None},
        {"cell_id": "cpu", "engine": "vllm", "simulated": False, "server_info": "{}",
         "gpu_ids": ""},
        {"cell_id": "old-sim", "engine": "sim", "simulated": True, "server_info": None,
         "gpu_ids": "0"},
        # an engine engines/ no longer has: its modelled GPUs cannot be read
        {"cell_id": "gone", "engine": "tgi-sim", "simulated": True, "server_info": SIM_INFO,
         "gpu_ids": "0"}])
    # the simulator: the GPUs its profile models (8), not the one logical GPU Ray gave it
    assert cell_gpus(cells) == {"sim": 8.0, "gpu": 4.0, "external": None, "cpu": None,
                                "old-sim": None, "gone": None}


def _images(page: str) -> list[str]:
    return re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)


def test_report_shows_capacity_frontier_and_cost(run_dir):
    # TPOT <= 15 ms. A synthetic request of 100 tokens lasts 100 / (per-stream tok/s) s, 5 %
    # of it to the first token, so TPOT = 0.95 x that / 99. At c=4 the baseline streams
    # 100 / 1.5 tok/s (1.5 s: TPOT 14.4 ms) and eagle3 1.1x faster (13.1 ms): both hold it;
    # at c=16 100 / 3 tok/s (28.8 ms) and 0.7x that (41 ms): neither does. Capacity c=4.
    report = write_report(run_dir, Slo(tpot_ms=15.0), gpu_hour_usd=2.0)
    page = report.html.read_text()
    section = page[page.index("<h2>Capacity, frontier and cost</h2>"):page.index("<h2>Plots")]
    assert "SIMULATION" in section  # the source, in the section itself
    assert "$2 per GPU-hour (set by the user)" in section
    names = [name for name, _ in _images(section)]
    assert names == ["frontier"]
    png = base64.b64decode(_images(section)[0][1])
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert "frontier" not in [name for name, _ in _images(page[page.index("<h2>Plots"):])]
    assert (run_dir / "plots" / "frontier.png").is_file()
    # self-contained: nothing fetched from anywhere
    assert "<script" not in page and not re.search(r'(src|href)="(https?:)?//', page)

    decision = json.loads(report.decision.read_text())
    assert decision["cost"] == {"gpu_hour_usd": 2.0, "gpus_unknown": []}
    caps = {c["variant"]: c for c in decision["capacity"]["per_variant"]}
    assert caps["baseline"]["capacity"] == 4.0 and caps["eagle3"]["capacity"] == 4.0
    # the range: c=16 misses (0 %), c=4 meets (its steady window's requests all within the
    # SLOs, more than the 36 that show 90 %, grid/analysis/capacity.py); c=1's 11 are too few
    # (undecided), but a lower load undecided does not move the range: c=4 .. c=4
    assert caps["baseline"]["interval"] == [4.0, 4.0] and caps["baseline"]["gpus"] == 8.0
    assert caps["baseline"]["attainments"]["4"]["verdict"] == "meets"
    assert caps["baseline"]["attainments"]["1"]["verdict"] == "undecided"
    # cost at the capacity point: 8 GPUs x $2 / 3600 / output tok/s x 1e6
    for c in caps.values():
        assert c["usd_per_mtok"] == pytest.approx(16 / 3600 / c["output_tok_s"] * 1e6)
    # eagle3 is 1.1x the baseline's per-stream speed at c=4: it serves the most there
    (best,) = decision["capacity"]["serves_most"]
    assert best["winner"] == "eagle3" and best["verdict"] == "winner"
    assert best["margin"] == pytest.approx(0.1, abs=0.02)
    points = {(p["variant"], p["concurrency"]): p for p in decision["pareto"]}
    assert len(points) == 6 and points[("eagle3", 1.0)]["frontier"] is True
    # baseline c=1 is slower per user and per GPU than eagle3 c=1 (1.4x): off the frontier
    assert points[("baseline", 1.0)]["frontier"] is False
    assert points[("baseline", 16.0)]["tok_s_per_gpu"] == pytest.approx(
        points[("baseline", 16.0)]["output_tok_s"] / 8)

    text = report.summary
    assert "operator's view (SIMULATION)" in text
    assert "capacity: eagle3 on coding: capacity c=4" in text
    assert "at the SLO on coding: eagle3 serves the most" in text
    assert "Pareto frontier on coding" in text


def test_saved_price_is_reused_and_a_bad_price_is_one_line(run_dir, capsys):
    write_report(run_dir, gpu_hour_usd=3.5)
    assert main([str(run_dir)]) == 0  # a plain re-render keeps the price
    assert json.loads((run_dir / "decision.json").read_text())["cost"]["gpu_hour_usd"] == 3.5
    capsys.readouterr()
    assert main([str(run_dir), "--gpu-hour-usd", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specgrid: error: --gpu-hour-usd must be > 0, got -1"]


def test_without_a_price_or_gpus_no_dollar_figures(tmp_path):
    path = tmp_path / "no-gpus"
    write_run(path, SPEEDS)  # no server_info: the GPUs are unknown
    report = write_report(path)
    decision = json.loads(report.decision.read_text())
    assert decision["cost"] == {"gpu_hour_usd": None, "gpus_unknown": ["baseline", "eagle3"]}
    assert all(p["tok_s_per_gpu"] is None and p["usd_per_mtok"] is None
               for p in decision["pareto"])
    assert "GPUs not recorded for baseline, eagle3" in report.summary
    assert "cost: no price set" in report.summary
    assert not (path / "plots" / "frontier.png").exists()  # nothing to draw per GPU


def test_loader_functions_for_a_notebook(run_dir):
    frontier = pareto(run_dir, gpu_hour_usd=2.0)
    assert len(frontier) == 6 and frontier.gpus.eq(8).all()
    assert frontier.usd_per_mtok.notna().all()
    caps = capacity(run_dir, Slo(tpot_ms=15.0)).set_index("variant")
    assert caps.loc["eagle3", "capacity"] == 4.0 and bool(caps.loc["eagle3", "serves_most"])
    assert not bool(caps.loc["baseline", "serves_most"])
    # an analysed run is reused as it is; another SLO needs the folder
    data = load_run(run_dir, Slo(tpot_ms=15.0))
    assert capacity(data).capacity.tolist() == caps.capacity.tolist()
    with pytest.raises(ValueError, match="pass the run folder"):
        capacity(data, Slo(tpot_ms=50.0))


def test_joules_per_token_where_power_was_read(tmp_path):
    path = tmp_path / "power-run"
    # cell baseline-c1: two GPUs at a constant 300 W for 10 s = 6000 J over its 8 requests x
    # 100 tokens: 6000 / 800 = 7.5 J per output token; no power read for the other cells
    rows = [{"run_id": path.name, "cell_id": "baseline-c1", "attempt": 1, "node": "n1",
             "gpu": gpu, "sampled_at": 1000.0 + t, "metric": "power_w", "value": 300.0,
             "note": None} for gpu in (0, 1) for t in range(11)]
    write_run(path, SPEEDS, telemetry={"baseline-c1": rows}, cell_fields={"server_info": SIM_INFO})
    decision = json.loads(write_report(path).decision.read_text())
    energy = {(p["variant"], p["concurrency"]): p["j_per_token"] for p in decision["pareto"]}
    assert energy.pop(("baseline", 1.0)) == pytest.approx(7.5)
    assert set(energy.values()) == {None}
    # no SLO set: every successful request counts, so the capacity is the highest tested load,
    # c=16, where no power was read
    (base,) = [c for c in decision["capacity"]["per_variant"] if c["variant"] == "baseline"]
    assert base["capacity"] == 16.0 and base["bracketed"] is False
    assert base["j_per_token"] is None
