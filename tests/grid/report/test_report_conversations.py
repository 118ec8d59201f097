"""The report of a run with conversation cells, from turn rows written through the real results
writer (grid/store/results.py): the cells table fills in from the rounds (numbers worked out by hand
below), the HTML has a conversation section with its figures, decision.json the findings."""

from __future__ import annotations

import base64
import json
import re

import pytest

from grid.report import write_report
from grid.report.data import load_run
from grid.report.text import summary_table
from grid.store.results import write_cell
from grid.store.schema import CELL_FIELDS, TURN_FIELDS
from tests.grid.analysis.synthetic import write_run

CONTEXT = [1000, 3000, 5000, 9000, 20000]  # bins 0-4k, 0-4k, 4-8k, 8-16k, 16k+
CACHED = [0, 900, 2900, 4900, 8900]        # hit rate 17600 / 38000 = 46 %
# One conversation of 5 rounds (plus one never sent) per cell, one in flight, rounds back to
# back, 11 output tokens each. baseline: every round lasts 1.0 s; eagle3: 0.5 s, except the
# 20k-token round (2.0 s), and reports spec_verify_ct.
ROUNDS = {
    "baseline": {"ttft": [0.1, 0.2, 0.3, 0.4, 0.5], "e2e": [1.0] * 5, "verify": [None] * 5},
    "eagle3": {"ttft": [0.05, 0.1, 0.15, 0.2, 0.25], "e2e": [0.5, 0.5, 0.5, 0.5, 2.0],
               "verify": [4, 4, 5, 5, 2]},
}


def _turns(run_id: str, cell_id: str, r: dict) -> list[dict]:
    rows, t = [], 1000.0
    for k in range(5):
        row = dict.fromkeys(TURN_FIELDS.names)
        row.update(run_id=run_id, cell_id=cell_id, attempt=1, engine="sim", simulated=True,
                   concurrency=1, conversation_id="conv-a", turn_index=k, num_turns=6,
                   domain="agentic", status="ok", context_tokens=CONTEXT[k],
                   cached_tokens=CACHED[k], output_tokens=11, scheduled_at=t, sent_at=t,
                   dispatch_lag_s=0.0, ttft_s=r["ttft"][k], e2e_s=r["e2e"][k],
                   tpot_s=(r["e2e"][k] - r["ttft"][k]) / 10, itl_s=[],
                   spec_verify_ct=r["verify"][k])
        rows.append(row)
        t += r["e2e"][k]
    unsent = dict.fromkeys(TURN_FIELDS.names)
    unsent.update(run_id=run_id, cell_id=cell_id, attempt=1, engine="sim", simulated=True,
                  concurrency=1, conversation_id="conv-a", turn_index=5, num_turns=6,
                  domain="agentic", status="not_run", error="load window ended", itl_s=[])
    return [*rows, unsent]


@pytest.fixture
def conv_run(tmp_path):
    return write_conversations(tmp_path / "agentic-run")


def write_conversations(run):
    """One conversation cell per variant of ROUNDS, written through the real results writer."""
    for variant, r in ROUNDS.items():
        cell_id = f"{variant}-conv-c1"
        row = dict.fromkeys(CELL_FIELDS.names)
        row.update(run_id=run.name, cell_id=cell_id, attempt=1, status="done", engine="sim",
                   simulated=True, concurrency=1, server_key=variant, model="llama3.1-8b",
                   factors=json.dumps({"concurrency": 1}), num_requests=6, requests_ok=5,
                   requests_error=0, error_rate=0.0, client_saturated=False,
                   cache_hit_rate=17600 / 38000, itl_p50_s=0.08, itl_p99_s=0.09,
                   server_command=f"python -m engines.sim --{variant}")
        write_cell(run, variant=variant, workload="agentic_conversations", cell_id=cell_id,
                   attempt=1, requests=[], cell_row=row, turns=_turns(run.name, cell_id, r))
    return run


def _line(table: str, variant: str) -> str:
    (line,) = [x for x in table.splitlines() if x.startswith(variant + " ")]
    return line


def test_summary_rows_of_conversation_cells_come_from_their_rounds(conv_run):
    data = load_run(conv_run)
    stats = data.stats.table.set_index("variant")
    # Closed loop, 1 in flight: the window runs from the first send to the last (round 4's),
    # so rounds 0-3 (11 tokens each) lived inside it and round 4's tokens came after it.
    # baseline: window 1000-1004 s: 44 tokens / 4 s; TTFT p50 of rounds 0-3 = 0.25 s; TPOT p50
    # = median(0.09, 0.08, 0.07, 0.06) = 0.075 s.
    assert stats.loc["baseline", "output_tok_s"] == pytest.approx(11.0)
    assert stats.loc["baseline", "window_requests"] == 4
    assert stats.loc["baseline", "measured_requests"] == 5  # the unsent round is no request
    assert stats.loc["baseline", "ttft_p50_s"] == pytest.approx(0.25)
    assert stats.loc["baseline", "tpot_p50_s"] == pytest.approx(0.075)
    # eagle3: window 1000-1002 s: 44 / 2 = 22 tok/s; TTFT p50 0.125 s; TPOT p50 0.0375 s;
    # accept length over all 5 completed rounds: 55 tokens / 20 verify steps.
    assert stats.loc["eagle3", "output_tok_s"] == pytest.approx(22.0)
    assert stats.loc["eagle3", "ttft_p50_s"] == pytest.approx(0.125)
    assert stats.loc["eagle3", "tpot_p50_s"] == pytest.approx(0.0375)
    assert stats.loc["eagle3", "accept_length"] == pytest.approx(2.75)
    table = summary_table(data.stats.table)
    base, eagle = _line(table, "baseline"), _line(table, "eagle3")
    assert "cache hit" in table.splitlines()[0]
    assert base.split()[2:4] == ["c=1", "11"] and "250 ms" in base and "75.0 ms" in base
    assert "46%" in base and "4s/4" in base and base.endswith("done")
    assert eagle.split()[2:4] == ["c=1", "22"] and "125 ms" in eagle and "37.5 ms" in eagle
    assert " 2.75 " in eagle and "46%" in eagle and "2s/4" in eagle
    # the decision compares them like any cells: +100 % at one conversation in flight
    (speedup,) = data.decision.speedups.itertuples()
    assert speedup.workload == "agentic_conversations" and speedup.load == 1.0
    assert speedup.speedup == pytest.approx(1.0)


def test_html_has_the_conversation_section_with_its_figures(conv_run):
    report = write_report(conv_run)
    page = report.html.read_text()
    section = page[page.index("<h2>Conversations</h2>"):page.index("<h2>Cells</h2>")]
    assert "SIMULATION" in section
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', section)
    assert [alt for alt, _ in images] == ["conversation_load", "conversation_context"]
    assert all(base64.b64decode(b).startswith(b"\x89PNG") and len(base64.b64decode(b)) > 5000
               for _, b in images)
    plots = page[page.index("<h2>Plots</h2>"):page.index("<h2>Conversations</h2>")]
    assert "conversation_" not in plots  # shown once, in their section
    assert "baseline 46% over 5 rounds; eagle3 46% over 5 rounds" in section
    # per cell: conversations, rounds, tok/s, ratio to the baseline, ITL from the cell row
    eagle = section[section.index("<td class=n>eagle3</td>"):]
    eagle = eagle[:eagle.index("</tr>")]
    cells = re.findall(r"<td class=n>(.*?)</td>", eagle)
    assert cells[4:6] == ["1", "5"] and cells[6].startswith("22.0 ") and cells[7] == "2.00x"
    assert cells[10:12] == ["80.0", "90.0"] and cells[12].startswith("2.75") \
        and cells[13] == "46%"
    # by context: eagle3's 16k+ round took 2.0 s against the baseline's 1.0 s
    assert "eagle3 c=1: stops paying from context 16k+ (speedup 0.50x)" in section
    assert "<td class=n>16k+</td>" in section
    # the cells table has numbers for them too (no dash in tok/s)
    cells_table = page[page.index("<h2>Cells</h2>"):]
    assert "<td class=n>22.0 <small>" in cells_table and "<td class=n>11.0 <small>" in cells_table


def test_decision_json_carries_the_conversation_findings(conv_run):
    decision = json.loads(write_report(conv_run).decision.read_text())
    conv = decision["conversations"]
    assert conv["stops_paying"] == [{"variant": "eagle3", "concurrency": 1,
                                     "stops_from": "16k+", "speedup_there": 0.5,
                                     "speedup_min": 0.5, "speedup_max": 2.0}]
    assert conv["prefix_cache_hit_rate"]["eagle3"] == pytest.approx(17600 / 38000)
    bins = {(r["variant"], r["bin"]): r for r in conv["by_context"]}
    assert bins[("eagle3", "0-4k")]["rounds"] == 2
    assert bins[("eagle3", "0-4k")]["round_tok_s"] == pytest.approx(22 / 1.0)
    assert bins[("eagle3", "0-4k")]["accept_length"] == pytest.approx(22 / 8)
    assert bins[("baseline", "0-4k")]["accept_length"] is None
    assert [s["workload"] for s in decision["speedups"]] == ["agentic_conversations"]


def test_a_run_without_conversations_has_no_section(tmp_path):
    run = tmp_path / "prompts-run"
    write_run(run, {"baseline": {1: 50.0}, "eagle3": {1: 80.0}})
    report = write_report(run)
    assert "<h2>Conversations</h2>" not in report.html.read_text()
    assert "conversations" not in json.loads(report.decision.read_text())
    assert "cache hit" not in report.summary
