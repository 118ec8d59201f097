"""`+sweep=smoke` end to end: Hydra -> cells -> real Ray actors -> real simulator processes ->
httpx -> real Parquet; then the same command again resumes and starts nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from grid.loader import load_cells, load_requests, load_server_metrics
from grid.run import run

pytestmark = pytest.mark.usefixtures("ray_session")
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "explore.ipynb"

REQUEST_COLUMNS = {"run_id", "cell_id", "variant", "workload", "concurrency", "domain",
                   "request_id", "attempt", "status", "error", "input_tokens", "output_tokens",
                   "scheduled_at", "sent_at", "ttft_s", "e2e_s", "tpot_s", "itl_s",
                   "accept_length"}


def _servers(run_dir):
    with sqlite3.connect(run_dir / "_ledger.sqlite") as db:
        return db.execute("SELECT server_key, pid, stopped_at FROM servers").fetchall()


def test_smoke_sweep_end_to_end_then_resume(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=smoke", f"results_dir={tmp_path}"], echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    run_dir = outcome.run_dir

    requests = pd.read_parquet(run_dir / "requests")
    assert REQUEST_COLUMNS <= set(requests.columns)
    assert len(requests) == 4 * 6  # 4 cells x 6 measured requests (warmup excluded)
    assert (requests.status == "ok").all()
    assert (requests.output_tokens == 16).all()
    assert requests.groupby("cell_id").request_id.nunique().eq(6).all()
    eagle = requests[requests.variant.astype(str) == "eagle3"]
    base = requests[requests.variant.astype(str) == "baseline"]
    assert eagle.accept_length.notna().all() and (eagle.accept_length > 1).all()
    assert base.accept_length.isna().all()
    assert (requests.ttft_s > 0).all() and (requests.e2e_s >= requests.ttft_s).all()
    assert requests.itl_s.map(len).eq(15).all()  # 16 tokens -> 15 gaps

    cells = load_cells(run_dir)
    assert len(cells) == 4 and (cells.status == "done").all()
    assert (cells.output_tok_s > 0).all() and cells.simulated.all()
    assert cells.server_command.str.contains("engines.sim").all()
    assert (cells[cells.variant == "eagle3"].accept_length > 1).all()

    # Server counters sampled around each cell's measured window (scraping starts after the
    # clients' warm-up barrier): generated tokens = the measured requests' exactly.
    metrics = load_server_metrics(run_dir)
    generated = metrics[metrics.metric == "sglang:generation_tokens_total"]
    for cell_id, samples in generated.groupby("cell_id"):
        # one series per is_streaming value (SGLang 0.5.23 labels); sum them per scrape
        per_scrape = samples.groupby("scraped_at").value.sum().sort_index()
        delta = per_scrape.iloc[-1] - per_scrape.iloc[0]
        assert delta == requests[requests.cell_id == cell_id].output_tokens.sum()

    servers = _servers(run_dir)
    assert len(servers) == 2  # exactly one launch per server key
    assert len({key for key, _, _ in servers}) == 2
    assert all(stopped is not None for _, _, stopped in servers)
    assert any("SIMULATION" in line for line in lines)
    report = (run_dir / "report.md").read_text()
    assert "SIMULATION" in report and "eagle3 vs baseline on coding" in report

    # The same command again: nothing to do, no server started, files untouched.
    files = {p: p.stat().st_mtime_ns for p in (run_dir / "requests").rglob("*.parquet")}
    again = run(["+sweep=smoke", f"results_dir={tmp_path}"], echo=lines.append)
    assert again.exit_code == 0 and again.counts["done"] == 4
    assert len(_servers(run_dir)) == 2
    assert {p: p.stat().st_mtime_ns for p in files} == files
    assert len(load_requests(run_dir)) == 24


@pytest.mark.slow
def test_notebook_reads_a_run(tmp_path, monkeypatch):
    """notebooks/explore.ipynb's code cells run against a real run folder laid out as in the
    repository (notebooks/ beside results/)."""
    outcome = run(["+sweep=smoke", f"results_dir={tmp_path / 'results'}"], echo=lambda _: None)
    assert outcome.exit_code == 0
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    scope: dict = {}
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(NOTEBOOK), "exec"), scope)
    assert scope["run_dir"].resolve() == outcome.run_dir.resolve()
    assert list(scope["table"].columns) == ["baseline", "eagle3"]
    assert scope["by"].accept_length.gt(1).all()
