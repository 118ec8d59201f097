"""The terminal summary of a run: the run's answer in one sentence first (grid/report/
answer.py), the decision (speedups with intervals, crossover, recommended threshold, threshold
winners, the setups compared), the validity findings (one line per kind), one line per cell
(windowed throughput and goodput with 95 % intervals, latency, acceptance, status), the
operator's view (capacity under the SLOs, the Pareto frontier, cost), acceptance by prompt
domain."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd

from grid.analysis.domains import distribution_summary
from grid.analysis.forced import forced_length, forced_mask
from grid.questions import traced
from grid.report import alignment, lossless, startup
from grid.report.agentic import agentic_summary
from grid.report.answer import answers
from grid.report.forced import tagged
from grid.report.markup import dash
from grid.report.rundata import RunData
from grid.report.validity import engine_versions


def _ci(row: pd.Series, name: str, fmt: str = "{:.0f}") -> str:
    if pd.isna(row.get(name)):
        return "-"
    return (f"{fmt.format(row[name])} [{dash(row.get(name + '_lo'), fmt)}, "
            f"{dash(row.get(name + '_hi'), fmt)}]")


def summary_table(table: pd.DataFrame) -> str:
    """One line per analysed cell (grid/analysis/cellstats.py's table; a conversation cell's
    requests are its sent rounds, grid/report/data.py `with_rounds`)."""
    if table.empty:
        return "(no committed cells)"
    view = table.sort_values(["workload", "variant", "concurrency", "rate", "repeat"],
                             na_position="last")
    repeats = view.repeat.nunique() > 1
    # Cells measured on several engine versions are shown side by side, each with its version.
    several = len(engine_versions(view)) > 1
    # Conversation cells (grid/report/agentic.py) add their prefix-cache hit rate.
    cache = "cache_hit_rate" in view and bool(view.cache_hit_rate.notna().any())
    wide = max(10, *(len(str(w)) for w in view.workload))
    named = max(26, *(len(str(v)) for v in view.variant))  # a setup's label can be long
    header = (f"{'variant':<{named}} {'workload':<{wide}} {'load':>7}{' rep' if repeats else ''} "
              f"{'tok/s [95% CI]':>20} {'goodput tok/s':>20} {'TTFT p50':>9} {'TPOT p50':>9} "
              f"{'accept':>6}{' cache hit' if cache else ''} {'window':>10}  status"
              + ("  [engine version]" if several else ""))
    lines = [header, "-" * len(header)]
    for _, row in view.iterrows():
        load = f"c={int(row.concurrency)}" if pd.isna(row.rate) else f"{row.rate:g}/s"
        status = str(row.status) + (" (client saturated)" if row.client_saturated is True
                                    else "")
        status = tagged(status, forced_length(row.get("forced_acceptance")) is not None)
        if row.status != "done" and isinstance(row.get("error"), str):
            status += ": " + _first_line(row.error, 70)
        window = (f"{row.window_s:.0f}s/{int(row.window_requests)}"
                  if not pd.isna(row.get("window_s")) else "-")
        rep = f" {int(row['repeat']):>3}"
        lines.append(
            f"{row.variant:<{named}} {row.workload:<{wide}} {load:>7}"
            f"{rep if repeats else ''} "
            f"{_ci(row, 'output_tok_s'):>20} {_ci(row, 'goodput_tok_s'):>20} "
            f"{dash(row.get('ttft_p50_s'), '{:.0f} ms', 1e3):>9} "
            f"{dash(row.get('tpot_p50_s'), '{:.1f} ms', 1e3):>9} "
            f"{dash(row.get('accept_length'), '{:.2f}'):>6}"
            + (f" {dash(row.get('cache_hit_rate'), '{:.0f}%', 100):>9}" if cache else "")
            + f" {window:>10}  {status}"
            + (f"  [{row.get('engine_version') or 'unknown'}]" if several else ""))
    return "\n".join(lines)


def _first_line(text: str, width: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[:width - 1] + "…"


def domain_acceptance(requests: pd.DataFrame, forced: Collection[str] = ()) -> list[str]:
    """Accept length per variant and prompt domain: Σ completion tokens / Σ verify steps over
    the domain's requests (never a server-lifetime average); the `forced` variants' lines
    labelled (grid/report/forced.py)."""
    spec = requests[(requests.status == "ok") & requests.spec_verify_ct.notna()]
    lines = []
    for (variant, domain), group in spec.groupby(["variant", "domain"], observed=True):
        verify = group.spec_verify_ct.sum()
        if verify:
            lines.append(tagged(f"{variant} / {domain}: accept length "
                                f"{group.output_tokens.sum() / verify:.2f} ({len(group)} "
                                "requests)", str(variant) in forced))
    return lines


def summary_text(data: RunData) -> str:
    first, *rest = answers(data.decision, data.label, data.search, data.provisional)
    parts = [first]
    if rest:  # the question the run asked: its answer, its steps, then the generic sentence
        search = data.search or {}
        parts += ["\n" + "\n".join(traced(search).lines(search)), "", *rest]
    lines = data.decision.lines()
    if lines:
        parts.append("\n" + "\n".join(lines))
    parts.append("")
    parts += [f"{level.upper()}: {text}" if level == "warning" else f"note: {text}"
              for level, text in data.validity]
    parts.append("")
    parts.append(summary_table(data.stats.table))
    parts.append(f"\nwindow = steady-state window (s / requests in it); goodput SLO: "
                 f"{data.slo.describe()}")
    if data.search is not None and not rest:  # a search with no answer yet: its steps here
        parts.append("\n" + "\n".join(traced(data.search).lines(data.search)))
    operator = data.operator.lines() if data.operator else []
    if operator:
        source = f" ({data.label})" if data.label else ""
        parts.append(f"\noperator's view{source}: frontier, capacity under the SLOs, cost\n"
                     + "\n".join(operator))
    # forced cells' acceptance is the engine's, told: not the drafter's on a domain
    unforced = data.cells[~forced_mask(data.cells)] if len(data.cells) else data.cells
    distribution = distribution_summary(data.requests, unforced)
    if distribution:
        parts.append("\n" + distribution)
    lesson = alignment.section(data)
    if lesson:
        parts.append("\n" + lesson)
    parts += [f"\n{block}" for block in (lossless.section(data), startup.section(data))
              if block]
    agentic = agentic_summary(data.turns, data.stats.table, data.baseline)  # conversation cells
    if agentic:
        parts.append("\n" + "\n".join(agentic))
    return "\n".join(parts)
