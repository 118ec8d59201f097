"""The summary of a run: one line per cell (variant, workload, load, throughput, latency,
acceptance, status), read back from the committed Parquet through the loader."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from grid.loader import load_cells

SIM_BANNER = "SIMULATION — numbers come from specgrid's simulated SGLang server, not a GPU."


def summary_table(cells: pd.DataFrame) -> str:
    if cells.empty:
        return "(no committed cells)"
    view = cells.sort_values(["workload", "variant", "concurrency", "rate"], na_position="last")
    header = (f"{'variant':<28} {'workload':<12} {'load':>9} {'tok/s':>9} {'TTFT p50':>10} "
              f"{'TPOT p50':>10} {'accept':>7}  status")
    lines = [header, "-" * len(header)]
    for _, row in view.iterrows():
        load = f"c={int(row.concurrency)}" if pd.isna(row.rate) else f"{row.rate:g}/s"
        status = row.status + (" (client saturated)" if row.client_saturated is True else "")
        lines.append(
            f"{str(row.variant):<28} {str(row.workload):<12} {load:>9} "
            f"{_num(row.output_tok_s, '{:.1f}'):>9} {_num(row.ttft_p50_s, '{:.1f} ms', 1e3):>10} "
            f"{_num(row.tpot_p50_s, '{:.2f} ms', 1e3):>10} {_num(row.accept_length, '{:.2f}'):>7}"
            f"  {status}")
    return "\n".join(lines)


def _num(value: object, fmt: str, scale: float = 1.0) -> str:
    if value is None or pd.isna(value):
        return "-"
    return fmt.format(float(value) * scale)


def run_summary(run_dir: Path, cell_ids: Iterable[str] | None = None) -> str:
    cells = load_cells(run_dir)
    if cell_ids is not None:
        cells = cells[cells.cell_id.isin(set(cell_ids))]
    text = summary_table(cells)
    if len(cells) and bool(cells.simulated.fillna(False).any()):
        text = f"{SIM_BANNER}\n{text}"
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m grid.report RESULTS/RUN_ID", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    if not (run_dir / "cells").is_dir():
        print(f"specgrid: error: {run_dir} holds no committed cells", file=sys.stderr)
        return 2
    print(run_summary(run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
