"""The summary of a run: one line per cell (variant, workload, load, throughput, latency,
acceptance, status), read back from the committed Parquet through the loader."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from grid.loader import load_cells, load_requests

SIM_BANNER = "SIMULATION — numbers come from specgrid's simulated SGLang server, not a GPU."


def summary_table(cells: pd.DataFrame) -> str:
    """One line per cell; when the cells were measured on several engine versions, each line
    names its version (side by side, never silently mixed)."""
    if cells.empty:
        return "(no committed cells)"
    versions = _versions(cells)
    several = versions.nunique() > 1
    view = cells.assign(engine_version=versions).sort_values(
        ["workload", "variant", "concurrency", "rate", "engine_version"], na_position="last")
    header = (f"{'variant':<28} {'workload':<12} {'load':>9} {'tok/s':>9} {'TTFT p50':>10} "
              f"{'TPOT p50':>10} {'accept':>7}  status" + ("  [engine version]" if several else ""))
    lines = [header, "-" * len(header)]
    for _, row in view.iterrows():
        load = f"c={int(row.concurrency)}" if pd.isna(row.rate) else f"{row.rate:g}/s"
        status = row.status + (" (client saturated)" if row.client_saturated is True else "")
        lines.append(
            f"{str(row.variant):<28} {str(row.workload):<12} {load:>9} "
            f"{_num(row.output_tok_s, '{:.1f}'):>9} {_num(row.ttft_p50_s, '{:.1f} ms', 1e3):>10} "
            f"{_num(row.tpot_p50_s, '{:.2f} ms', 1e3):>10} {_num(row.accept_length, '{:.2f}'):>7}"
            f"  {status}" + (f"  [{row.engine_version}]" if several else ""))
    return "\n".join(lines)


def _versions(cells: pd.DataFrame) -> pd.Series:
    """Each cell's engine version ("unknown" where none was recorded)."""
    if "engine_version" not in cells:
        return pd.Series("unknown", index=cells.index)
    return cells.engine_version.fillna("unknown")


def _num(value: Any, fmt: str, scale: float = 1.0) -> str:
    if value is None or pd.isna(value):
        return "-"
    return fmt.format(float(value) * scale)


def speculation_verdicts(cells: pd.DataFrame, baseline: str = "baseline") -> list[str]:
    """For each speculative variant and workload: at which concurrencies it beats the baseline
    on output tok/s, and the largest concurrency up to which it keeps winning — the data
    behind a speculation-disable threshold. Cells of different engine versions are never
    compared with each other: with several versions, one set of lines per version."""
    done = cells[(cells.status == "done") & cells.rate.isna()]
    versions = _versions(done)
    if versions.nunique() > 1:
        return [f"[{version}] {line}" for version, same in done.groupby(versions, sort=True)
                for line in speculation_verdicts(same.assign(engine_version=version), baseline)]
    base = done[done.variant == baseline].set_index(["workload", "concurrency"]).output_tok_s
    lines = []
    for (variant, workload), group in done[done.accept_length.notna()].groupby(
            ["variant", "workload"], observed=True):
        pairs = [(int(c), tok, base.get((workload, c))) for c, tok in
                 zip(group.concurrency, group.output_tok_s, strict=True)
                 if (workload, c) in base.index]
        if not pairs:
            continue
        pairs.sort()
        parts = [f"c={c} {100 * (tok / b - 1):+.0f}%" for c, tok, b in pairs]
        wins = [c for c, tok, b in pairs if tok > b]
        keeps = 0
        for c, tok, b in pairs:
            if tok <= b:
                break
            keeps = c
        verdict = (f"speculation pays up to concurrency {keeps}" if keeps else
                   "speculation never pays here")
        if wins and keeps != wins[-1]:
            verdict += f" (also ahead at c={wins[-1]})"
        lines.append(f"{variant} vs {baseline} on {workload}: {', '.join(parts)} -> {verdict}")
    return lines


def domain_acceptance(requests: pd.DataFrame) -> list[str]:
    """Accept length per variant and prompt domain: Σ completion tokens / Σ verify steps over
    the domain's requests (never a server-lifetime average)."""
    spec = requests[(requests.status == "ok") & requests.spec_verify_ct.notna()]
    lines = []
    for (variant, domain), group in spec.groupby(["variant", "domain"], observed=True):
        verify = group.spec_verify_ct.sum()
        if verify:
            lines.append(f"{variant} / {domain}: accept length "
                         f"{group.output_tokens.sum() / verify:.2f} ({len(group)} requests)")
    return lines


def run_summary(run_dir: Path, cell_ids: Iterable[str] | None = None) -> str:
    cells = load_cells(run_dir)
    requests = load_requests(run_dir, columns=["cell_id", "variant", "domain", "status",
                                                "output_tokens", "spec_verify_ct"])
    if cell_ids is not None:
        cells = cells[cells.cell_id.isin(set(cell_ids))]
        requests = requests[requests.cell_id.isin(set(cell_ids))]
    text = summary_table(cells)
    if len(cells) and bool(cells.simulated.fillna(False).any()):
        text = f"{SIM_BANNER}\n{text}"
    verdicts = speculation_verdicts(cells)
    if verdicts:
        text += "\n\n" + "\n".join(verdicts)
    accept = domain_acceptance(requests)
    if accept:
        text += "\n\nacceptance by prompt domain:\n  " + "\n  ".join(accept)
    return text


def write_report(run_dir: Path) -> Path:
    """report.md in the run folder: the summary of every committed cell of the run."""
    path = run_dir / "report.md"
    tmp = run_dir / ".report.md.tmp"
    tmp.write_text(f"# specgrid run {run_dir.name}\n\n```\n{run_summary(run_dir)}\n```\n")
    tmp.replace(path)
    return path


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
