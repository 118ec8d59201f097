"""Cell statistics (grid/analysis/cellstats.py) and the summary table over them."""

from __future__ import annotations


def test_a_cell_that_did_not_finish_shows_no_figures() -> None:
    """A server that died mid-cell leaves request rows; its cell must not read as measured."""
    from grid.analysis.cellstats import analyse_cells
    from grid.report.text import summary_table
    from tests.grid.analysis.synthetic import grid

    cells, requests = grid({"baseline": {1: 80.0, 4: 70.0}})
    cells.loc[cells.concurrency == 4, "status"] = "failed"
    cells["error"] = [None, "server exited with code -9 during the cell"]
    table = analyse_cells(cells, requests, replicates=50).table
    failed = table[table.status == "failed"].iloc[0]
    assert failed.output_tok_s != failed.output_tok_s  # NaN: no figure
    assert table[table.status == "done"].output_tok_s.iloc[0] > 0
    line = next(ln for ln in summary_table(table).splitlines() if "c=4" in ln)
    assert "failed: server exited with code -9" in line
    assert " 0 [" not in line and line.split()[3] == "-"
