"""The report of a run: `python -m grid.report RESULTS/RUN` (also written at the end of every
`grid.run`) prints the summary and writes, into the run folder, `report.html` (self-contained:
plots embedded), `report.md` (the text summary), `decision.json` (machine-readable decision)
and `plots/*.png`. `python -m grid.report RUN_A RUN_B` compares two runs side by side."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grid.analysis import Slo
from grid.cli.runrecord import record_report_settings
from grid.questions import traced
from grid.report import alignment, forced, lossless, plots, startup
from grid.report.agentic import findings
from grid.report.data import DECISION_FILE, load_run, used_settings
from grid.report.html import compare_html, run_html
from grid.report.rundata import RunData
from grid.report.text import domain_acceptance, summary_table, summary_text
from grid.store.files import make_dirs, write_atomic

__all__ = ["Report", "domain_acceptance", "load_run", "main", "summary_table",
           "write_report"]


@dataclass
class Report:
    summary: str
    html: Path
    decision: Path
    plots: list[Path]


def render_figures(data: RunData) -> dict[str, bytes]:
    out = {}
    for name, make in plots.PLOTS.items():
        fig = make(data)
        if fig is not None:
            out[name] = plots.png(fig)
    return out


def decision_json(data: RunData) -> dict:
    table = data.stats.table
    return {
        "run": data.run_dir.name,
        "simulated": data.simulated,
        "source": data.label,  # e.g. "SIMULATION (twin of RUN)"; None: real GPUs
        "slo": data.slo.as_dict(),
        "confidence_level": 0.95,
        "bootstrap_replicates": data.stats.n_replicates,
        "validity": [{"level": level, "text": text} for level, text in data.validity],
        "cells": {"total": len(table),
                  "done": int((table.status == "done").sum()) if len(table) else 0,
                  **forced.cell_counts(table)},  # the forced cells' count and label, if any
        **data.decision.as_json(),
        # The operator's view: frontier, capacity under the SLOs, cost (grid/report/operator.py)
        **(data.operator.as_json() if data.operator else {}),
        # Conversation cells are in the speedups above like any cell (by conversations in
        # flight); this adds what only their rounds show: by context length.
        **({"conversations": conv} if (conv := findings(data.turns, data.baseline)) else {}),
        **({"alignment_vs_acceptance": rel} if (rel := alignment.decision(data)) else {}),
        # Greedy outputs against the baseline's (grid/report/lossless.py), start-up per variant
        **({"lossless": rows} if (rows := lossless.decision(data)) else {}),
        **({"startup": rows} if (rows := startup.decision(data)) else {}),
        # An adaptive search (grid.search.kind): every step, why, and why it stopped, and the
        # question's own entries (the speculation question: its recommendation and settings).
        **({"search": data.search, **traced(data.search).decision(data.search)}
           if data.search else {}),
    }


def write_report(run_dir: Path, slo: Slo | None = None, baseline: str = "baseline",
                 data: RunData | None = None, gpu_hour_usd: float | None = None) -> Report:
    """Everything into the run folder (each file replaced atomically, not fsynced: a report lost
    in a power loss is made again from the committed cells); `gpu_hour_usd`: the price of one
    GPU-hour for the dollar figures (default: the one the last report used)."""
    run_dir = Path(run_dir)
    data = data or load_run(run_dir, slo, baseline, gpu_hour_usd=gpu_hour_usd)
    text = summary_text(data)
    figures = render_figures(data)
    make_dirs(run_dir / "plots", fsync=False)
    paths = []
    for name, png in figures.items():
        path = run_dir / "plots" / f"{name}.png"
        write_atomic(path, png, fsync=False)
        paths.append(path)
    write_atomic(run_dir / "report.md", f"# specgrid run {run_dir.name}\n\n```\n{text}\n```\n",
                 fsync=False)
    write_atomic(run_dir / DECISION_FILE, json.dumps(decision_json(data), indent=2), fsync=False)
    record_report_settings(run_dir, used_settings(data))  # what a re-render keeps
    write_atomic(run_dir / "report.html", run_html(data, figures), fsync=False)
    if data.search:  # e.g. the speculation question's settings files, to paste
        traced(data.search).write_files(run_dir, data.search)
    return Report(text, run_dir / "report.html", run_dir / DECISION_FILE, paths)


def write_comparison(a: Path, b: Path, out: Path, slo: Slo | None = None,
                     baseline: str = "baseline") -> tuple[str, Path]:
    da, db = load_run(a, slo, baseline), load_run(b, slo, baseline)
    figures = {}
    fig = plots.compare_throughput(da, db)
    if fig is not None:
        figures["throughput A vs B"] = plots.png(fig)
    for name in ("speedup", "latency"):
        for tag, data in (("A", da), ("B", db)):
            f = plots.PLOTS[name](data)
            if f is not None:
                figures[f"{name} ({tag})"] = plots.png(f)
    write_atomic(out, compare_html(da, db, figures), fsync=False)
    text = (f"A = {a}\n{summary_text(da)}\n\nB = {b}\n{summary_text(db)}")
    return text, out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grid.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s): one, or two to compare")
    p.add_argument("--ttft-ms", type=float, help="goodput SLO on TTFT (default: as saved)")
    p.add_argument("--tpot-ms", type=float, help="goodput SLO on TPOT")
    p.add_argument("--e2e-ms", type=float, help="goodput SLO on end-to-end latency")
    p.add_argument("--gpu-hour-usd", type=float,
                   help="price of one GPU-hour in dollars, for the cost figures (default: as "
                        "saved; a run takes hardware.gpu_hour_usd)")
    p.add_argument("--baseline", default="baseline", help="variant the others are compared to")
    p.add_argument("--out", type=Path, help="comparison HTML (default ./compare-A-vs-B.html)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if len(args.runs) > 2:
        print("specgrid: error: give one run folder, or two to compare", file=sys.stderr)
        return 2
    for run in args.runs:
        if not (Path(run) / "cells").is_dir():
            print(f"specgrid: error: {run} holds no committed cells", file=sys.stderr)
            return 2
    if args.gpu_hour_usd is not None and not args.gpu_hour_usd > 0:
        print(f"specgrid: error: --gpu-hour-usd must be > 0, got {args.gpu_hour_usd:g}",
              file=sys.stderr)
        return 2
    slo = None
    if any(v is not None for v in (args.ttft_ms, args.tpot_ms, args.e2e_ms)):
        slo = Slo(args.ttft_ms, args.tpot_ms, args.e2e_ms)
    if len(args.runs) == 1:
        report = write_report(Path(args.runs[0]), slo, args.baseline,
                              gpu_hour_usd=args.gpu_hour_usd)
        print(report.summary)
        print(f"\nreport: {report.html}\ndecision: {report.decision}")
        return 0
    a, b = (Path(r) for r in args.runs)
    out = args.out or Path(f"compare-{a.name}-vs-{b.name}.html")
    text, path = write_comparison(a, b, out, slo, args.baseline)
    print(text)
    print(f"\ncomparison: {path}")
    return 0
