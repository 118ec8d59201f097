"""The report's losslessness and start-up sections: on a constructed run written through the
real results writer (answers known), and on simulator runs end to end, lossless by default and
with the simulator's deliberately lossy drafter (`engine.options.lossy_rate`)."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from grid.report import write_report
from grid.run import run
from grid.store.results import write_cell
from grid.store.schema import CELL_FIELDS, REQUEST_FIELDS
from tests.grid.analysis.synthetic import grid

GREEDY = {"p0": " def parse value", "p1": " return none", "p2": " class node cache"}


def h(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def constructed_run(run_dir, wrong: dict[str, str]) -> None:
    """baseline at c=1 and c=4 and eagle3 at c=1, 3 requests per stream cycling through the
    prompts p0..p2 (3, 12 and 3 requests), greedy; eagle3 answers `wrong[prompt]` where given.
    Every start took 12 s (baseline) or 20 s (eagle3), with SGLang's phases."""
    cells, requests = grid({"baseline": {1: 50.0, 4: 40.0}, "eagle3": {1: 60.0}}, per_stream=3)
    for cell in cells.to_dict("records"):
        rows = []
        req = requests[requests.cell_id == cell["cell_id"]].reset_index(drop=True)
        for i, r in enumerate(req.to_dict("records")):
            prompt = f"p{i % 3}"
            text = wrong.get(prompt, GREEDY[prompt]) if cell["variant"] == "eagle3" \
                else GREEDY[prompt]
            row = {k: r.get(k) for k in REQUEST_FIELDS.names}
            row.update(run_id=run_dir.name, attempt=1, engine="sim", simulated=True,
                       input_tokens=100, itl_s=[], rate=None, spec_verify_ct=None,
                       prompt_id=prompt, output_hash=h(text), output_chars=len(text),
                       output_text=text)
            rows.append(row)
        row = {k: cell.get(k) for k in CELL_FIELDS.names}
        seconds = 12.0 if cell["variant"] == "baseline" else 20.0
        row.update(run_id=run_dir.name, server_key=cell["variant"], model="kimi-k2.5-class",
                   rate=None, temperature=0.0, source="SIMULATION",
                   server_started_at=1000.0, server_startup_s=seconds,
                   server_startup_phases=json.dumps({"load_weight": seconds / 2,
                                                     "cuda_graph.decode": 1.5}))
        write_cell(run_dir, variant=cell["variant"], workload=cell["workload"],
                   cell_id=cell["cell_id"], attempt=1, requests=rows, cell_row=row)


def test_a_diverging_variant_is_flagged_in_every_part_of_the_report(tmp_path):
    run_dir = tmp_path / "constructed"
    # eagle3 diverges on p1 after " return " (8 characters) and p2 at once (0)
    constructed_run(run_dir, {"p1": " return true", "p2": "?"})
    report = write_report(run_dir)
    (entry,) = json.loads(report.decision.read_text())["lossless"]
    assert (entry["variant"], entry["compared"], entry["identical"]) == ("eagle3", 3, 1)
    assert entry["median_divergence_chars"] == 4.0  # the median of 8 and 0
    assert (entry["floor_compared"], entry["floor_identical"]) == (12, 12)  # baseline c=4
    # 1/3 against 12/12: P(X <= 1), X ~ Hypergeometric(N=15, K=13, n=3), X >= 1:
    # C(13,1) C(2,2) / C(15,3) = 13 / 455
    assert entry["p_value"] == pytest.approx(13 / 455) and entry["flagged"] is True
    assert "FLAGGED: diverges beyond the baseline's own floor" in report.summary
    assert "losslessness at temperature 0 [SIMULATION]" in report.summary
    page = report.html.read_text()
    assert "Losslessness at temperature 0 (SIMULATION)" in page and "FLAGGED</b>" in page
    # start-up per variant: one start each, the phases' medians as recorded
    startup = {s["variant"]: s for s in json.loads(report.decision.read_text())["startup"]}
    assert startup["baseline"]["starts"] == 1 and startup["baseline"]["startup_s"] == 12.0
    assert startup["eagle3"]["phases"] == {"load_weight": 10.0, "cuda_graph.decode": 1.5}
    assert ("eagle3: 1 start(s), 20.0 s median [20.0, 20.0]; phases (s): load_weight 10.00, "
            "cuda_graph.decode 1.50") in report.summary


def test_identical_outputs_are_not_flagged(tmp_path):
    run_dir = tmp_path / "constructed"
    constructed_run(run_dir, {})
    (entry,) = json.loads(write_report(run_dir).decision.read_text())["lossless"]
    assert entry["fraction_identical"] == 1.0 and entry["flagged"] is False
    assert entry["median_divergence_chars"] is None


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory, ray_session):
    """Two smoke grids on the simulator, greedy, 12 requests per cell: lossless (the default,
    with 1 s of simulated start-up) and with half the prompts given a wrong token after their
    first accepted draft."""
    out = {}
    for name, extra in (("lossless", ["engine.options.startup_seconds=1"]),
                        ("lossy", ["engine.options.lossy_rate=0.5"])):
        lines: list[str] = []
        outcome = run(["+sweep=smoke", "load.num_requests=12",
                       f"results_dir={tmp_path_factory.mktemp(name)}", *extra],
                      echo=lines.append)
        assert outcome.exit_code == 0, "\n".join(lines)
        out[name] = outcome.run_dir
    return out


@pytest.mark.slow
def test_simulator_lossless_by_default_and_flagged_when_lossy(sim_runs):
    clean = json.loads((sim_runs["lossless"] / "decision.json").read_text())
    (entry,) = clean["lossless"]
    # eagle3 at c=1 and c=4 against the baseline at c=1; the floor: the baseline at c=4
    assert (entry["compared"], entry["identical"]) == (24, 24)
    assert (entry["floor_compared"], entry["floor_identical"]) == (12, 12)
    assert entry["flagged"] is False
    lossy = json.loads((sim_runs["lossy"] / "decision.json").read_text())
    (entry,) = lossy["lossless"]
    assert entry["compared"] == 24 and 0 < entry["identical"] < 24
    assert entry["floor_identical"] == 12 and entry["flagged"] is True
    assert entry["median_divergence_chars"] > 0  # after at least one correct token
    summary = (sim_runs["lossy"] / "report.md").read_text()
    assert "FLAGGED: diverges beyond the baseline's own floor" in summary
    print(entry["statement"])  # the measured numbers (SIMULATION), for the docs


@pytest.mark.slow
def test_simulator_start_up_per_variant(sim_runs):
    startup = {s["variant"]: s for s in
               json.loads((sim_runs["lossless"] / "decision.json").read_text())["startup"]}
    assert set(startup) == {"baseline", "eagle3"}
    for s in startup.values():
        assert s["starts"] == 1 and s["source"] == "SIMULATION"
        # 1 s of simulated start-up, split 0.6 / 0.1 / 0.3 by the simulator (sleeps: at least)
        assert s["phases"]["load_weight"] >= 0.6 and s["phases"]["cuda_graph.decode"] >= 0.3
        assert s["startup_s"] > 1.0  # the interpreter, the phases and the warm-up
    summary = (sim_runs["lossless"] / "report.md").read_text()
    assert "server start-up per variant [SIMULATION]:" in summary
    assert pd.notna(startup["eagle3"]["startup_s_max"])
