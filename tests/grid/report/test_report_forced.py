"""Forced-acceptance cells labelled everywhere the report shows them (grid/report/forced.py):
the cells tables (terminal / report.md, report.html), the plots (a style of their own and one
legend entry), decision.json; and a run without forced cells (a ladder of drafters) shows no
label at all. Real Parquet through the results writer, the report written by `write_report`."""

from __future__ import annotations

import json

import pytest
from matplotlib.container import ErrorbarContainer

from grid.analysis.forced import FORCED_LABEL
from grid.report import plots, write_report
from grid.report.data import load_run
from tests.grid.analysis.synthetic import write_run
from tests.grid.report.test_report_conversations import write_conversations
from tests.grid.report.test_report_server_metrics import SGLANG, _rows

FORCED = ["eagle3__forced_len-1.5", "eagle3__forced_len-3.5"]


def _power(cell_id: str) -> list[dict]:
    """One GPU at 300 W, 3 samples: enough for the telemetry plot to draw the cell."""
    return [{"run_id": "forced", "cell_id": cell_id, "attempt": 1, "node": "n1", "gpu": 0,
             "sampled_at": 1000.0 + t, "metric": "power_w", "value": 300.0, "note": None}
            for t in range(3)]


@pytest.fixture(scope="module")
def forced_run(tmp_path_factory):
    """The baseline, the drafter's own eagle3, and eagle3 forced to 1.5 and 3.5, at c=1 and 4:
    4 forced cells of 8."""
    run = tmp_path_factory.mktemp("forced") / "forced"
    write_run(run, {"baseline": {1: 100.0, 4: 50.0}}, jitter=0.0,
              telemetry={"baseline-c1": _power("baseline-c1")},
              server_metrics={"baseline-c1": _rows(run.name, "baseline-c1", SGLANG)})
    write_run(run, {"eagle3": {1: 110.0, 4: 45.0}}, jitter=0.0, spec_accept=2.0)
    for length, speeds in ((1.5, {1: 80.0, 4: 30.0}), (3.5, {1: 120.0, 4: 55.0})):
        forced = json.dumps({"length": length, "mean_length": length})
        cell = f"eagle3__forced_len-{length}-c1"
        write_run(run, {f"eagle3__forced_len-{length}": speeds}, jitter=0.0,
                  spec_accept=length, cell_fields={"forced_acceptance": forced},
                  telemetry={cell: _power(cell)},
                  server_metrics={cell: _rows(run.name, cell, SGLANG)})
    write_report(run)
    return run


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    """Two drafters of the same configuration, nothing forced (a ladder at its measured accept
    lengths 1.5 and 3.5)."""
    run = tmp_path_factory.mktemp("ladder") / "ladder"
    write_run(run, {"baseline": {1: 100.0, 4: 50.0}}, jitter=0.0)
    for rung, length, speeds in (("noise-0.30", 1.5, {1: 80.0, 4: 30.0}),
                                 ("noise-0.00", 3.5, {1: 120.0, 4: 55.0})):
        write_run(run, {f"eagle3__draft-{rung}": speeds}, jitter=0.0, spec_accept=length,
                  cell_fields={"accept_length_decode": length})
    write_report(run)
    return run


def _series(ax) -> dict[str, tuple[object, object]]:
    """Label -> (line style, marker) of each series drawn on the axes."""
    out = {}
    for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
        line = handle.lines[0] if isinstance(handle, ErrorbarContainer) else handle
        out[label] = (line.get_linestyle(), line.get_marker())
    return out


def _axes(name: str, data) -> list:
    fig = plots.PLOTS[name](data)
    assert fig is not None
    return fig.axes


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_forced_cells_are_labelled_in_the_cells_tables(forced_run):
    table = (forced_run / "report.md").read_text().split("goodput tok/s")[1]
    rows = [line for line in table.splitlines() if line.startswith(("baseline", "eagle3"))]
    assert len(rows) == 8
    assert [r.split()[0] for r in rows if r.endswith(f"done [{FORCED_LABEL}]")] == \
        [v for v in FORCED for _ in (1, 4)]
    page = (forced_run / "report.html").read_text()
    cells = page[page.index("<h2>Cells</h2>"):page.index("<h2>Provenance")]
    labelled = [row.split("</td>")[0].removeprefix("<td class=n>")
                for row in cells.split("<tr>")[2:] if f"done [{FORCED_LABEL}]" in row]
    assert labelled == [v for v in FORCED for _ in (1, 4)]
    # acceptance by prompt domain: the forced variants' lines, not the drafter's own (100
    # tokens in 100 / 2 = 50 verify steps, 8 + 4 x 8 requests)
    domains = page[page.index("<h2>Acceptance by prompt domain"):]
    domains = domains[:domains.index("</ul>")]
    assert domains.count(f"[{FORCED_LABEL}]") == 2
    assert "<li>eagle3 / coding: accept length 2.00 (40 requests)</li>" in domains


def test_forced_cells_are_labelled_in_decision_json(forced_run):
    decision = json.loads((forced_run / "decision.json").read_text())
    assert decision["cells"] == {"total": 8, "done": 8, "forced": 4,
                                 "forced_label": FORCED_LABEL}


def test_forced_series_have_their_own_style_and_legend_entry(forced_run):
    data = load_run(forced_run)
    plain = {"baseline", "eagle3"}
    for name in ("throughput", "latency"):
        for ax in _axes(name, data):
            assert _legend(ax)[-1] == FORCED_LABEL and _legend(ax).count(FORCED_LABEL) == 1
            for label, (line, marker) in _series(ax).items():
                variant = label.removesuffix(" p50").removesuffix(" p99")
                if variant in plain:
                    assert marker != "x"
                else:
                    assert variant in FORCED and marker == "x"
                    assert line == (":" if label.endswith(("p50", "_len-1.5", "_len-3.5"))
                                    else "--")
    by_domain, by_load = _axes("acceptance", data)
    assert _legend(by_domain) == ["eagle3", *FORCED, FORCED_LABEL]
    assert [p.get_hatch() for p in by_domain.patches] == [None, "//", "//"]
    assert _legend(by_load) == ["eagle3", *FORCED, FORCED_LABEL]
    assert _series(by_load) == {"eagle3": ("-", "o"), FORCED[0]: (":", "x"),
                                FORCED[1]: (":", "x")}
    (power,) = _axes("telemetry", data)  # baseline c=1 plain, the forced c=1 cells hatched
    assert [p.get_hatch() for p in power.patches] == [None, "//", "//"]
    assert _legend(power) == [FORCED_LABEL]
    gauges = _axes("server_metrics", data)  # the same three cells' servers, forced dotted
    assert _legend(gauges[0]) == ["baseline", *FORCED, FORCED_LABEL]
    assert _series(gauges[0]) == {"baseline": ("-", "None"), FORCED[0]: (":", "None"),
                                  FORCED[1]: (":", "None")}
    dotted = [style[1] is not None for style in gauges[0].collections[0].get_linestyles()]
    assert dotted == [False, True, True]


def test_a_run_without_forced_cells_shows_no_label(ladder_run):
    for name in ("report.html", "report.md", "decision.json"):
        assert FORCED_LABEL not in (ladder_run / name).read_text()
    decision = json.loads((ladder_run / "decision.json").read_text())
    assert decision["cells"] == {"total": 6, "done": 6}
    data = load_run(ladder_run)
    for name in ("throughput", "latency", "acceptance"):
        for ax in _axes(name, data):
            assert FORCED_LABEL not in _legend(ax)
            assert all(p.get_hatch() is None for p in ax.patches)
            assert all(line.get_marker() != "x" for line in ax.get_lines())


def test_forced_conversation_cells_are_labelled_in_their_table_and_plots(tmp_path):
    from grid.report.html import conversation_section

    data = load_run(write_conversations(tmp_path / "agentic-run"))
    eagle = data.cells.variant == "eagle3"  # its one cell made forced, as a forced axis would
    data.cells.loc[eagle, "forced_acceptance"] = json.dumps({"length": 2.0, "mean_length": 2.0})
    section = conversation_section(data, {})
    cells = section[:section.index("<p>By context length")]  # one row per cell
    rows = [r for r in cells.split("<tr>") if "<td class=n>eagle3</td>" in r]
    assert len(rows) == 1 and f"done [{FORCED_LABEL}]" in rows[0]
    assert section.count(FORCED_LABEL) == 1  # the baseline's row is not labelled
    tok_s, hits = _axes("conversation_load", data)
    for ax in (tok_s, hits):
        assert _legend(ax) == ["baseline", "eagle3", FORCED_LABEL]
        assert _series(ax)["eagle3"][1] == "x" and _series(ax)["baseline"][1] == "o"
    ttft, accept, cache, speed = _axes("conversation_context", data)
    assert _legend(accept) == ["eagle3 c=1", FORCED_LABEL]  # the baseline verifies nothing
    assert _series(ttft) == {"baseline c=1": ("-", "o"), "eagle3 c=1": ("-", "x")}
