"""What limits a run's evidence, most important first: the report's validity section
(simulation or CPU banners, extrapolated cells, saturated clients, failed cells, several engine
versions, off-distribution prompts, loose intervals, ...)."""

from __future__ import annotations

import json
import numbers
import re
from typing import Any

import pandas as pd

import engines
from engines.planning import Scenario
from grid.report.rundata import RunData
from grid.report.stopping import stop_findings

ALIGNMENT = "alignment_ok"
"""The request and cell column that says whether a prompt is on the drafter's distribution."""


def engine_versions(table: pd.DataFrame) -> list[str]:
    """The distinct engine versions of a run's cells, sorted ("unknown" where none is
    recorded); more than one means the cells table must name each cell's version."""
    if "engine_version" not in table:
        return []
    return sorted(table.engine_version.astype(object).fillna("unknown").unique())


def server_clock_check(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """The client's TTFT against the server's own first-token latency (SGLang's native stream):
    the client can only be later; a client reading earlier than the server's clock says its
    timestamps are wrong."""
    if "ttft_minus_server_p50_s" not in cells or cells.ttft_minus_server_p50_s.isna().all():
        return []
    p50 = cells.ttft_minus_server_p50_s.dropna()
    early = cells[cells.ttft_minus_server_p50_s < -0.001]
    if len(early):
        return [("warning", f"client TTFT below the server's own first-token latency in "
                            f"{len(early)} cell(s): the client's timestamps are suspect")]
    return [("note", f"client TTFT minus the server's own first-token latency: median of the "
                     f"cells {p50.median() * 1e3:.1f} ms (largest p99 "
                     f"{cells.ttft_minus_server_p99_s.max() * 1e3:.1f} ms, {len(p50)} cells)"
                     + modelled_clock(cells))]


def clock_scales(cells: pd.DataFrame) -> list[float]:
    """The clock scales other than 1 the cells' engines ran at (engines/base.py
    `Engine.clock_scale`: their figures are on a simulator's modelled clock)."""
    if "engine_options" not in cells:
        return []
    found = set()
    for name, text in cells[["engine", "engine_options"]].dropna().drop_duplicates(
            ).itertuples(index=False):
        kind = engines.find(name)
        if kind is not None and isinstance(text, str):
            found.add(kind.clock_scale(json.loads(text) or {}))
    return sorted(found - {1.0})


def modelled_clock(cells: pd.DataFrame) -> str:
    """What the modelled clock does to the client's timing error: the delay above is divided
    by the scale with every other time, so it is set against the shortest request (a closed
    loop's next request waits for it: throughput is biased by about delay / request time)."""
    scales = clock_scales(cells)
    if not scales or "e2e_p50_s" not in cells or cells.e2e_p50_s.isna().all():
        return ""
    delay, shortest = cells.ttft_minus_server_p50_s.median(), cells.e2e_p50_s.min()
    words = " and ".join(f"{s:g}" for s in scales)
    return (f"; on the simulator's modelled clock (time_scale {words}: wall times / scale, "
            f"the client's delay with them), {delay / shortest:.1%} of the shortest request "
            f"(e2e p50 {shortest * 1e3:.0f} ms)")


def _scenario(row: Any, mine: pd.DataFrame, running: pd.Series, conversational: bool
              ) -> Scenario:
    """What a simulated cell asked of its profile, from what the run recorded: concurrency (an
    open-loop cell: its mean running batch from the server's gauge), the most output tokens and
    the shortest and longest prompt of its requests (server-counted), its variant's args and
    speculation threshold and its prompts' domains."""
    cid, given = str(row.cell_id), row.concurrency
    concurrency = float(given) if isinstance(given, numbers.Real) and given == given \
        else (round(float(running[cid]), 1) if cid in running else None)
    lengths = mine.input_tokens.dropna()
    outputs = mine.output_tokens.dropna()
    return Scenario(
        args=json.loads(row.server_args) if isinstance(row.server_args, str) else {},
        concurrency=concurrency,
        output_tokens=int(outputs.max()) if len(outputs) else None,
        prompt_tokens=(int(lengths.min()), int(lengths.max())) if len(lengths) else None,
        domains=sorted(mine.domain.dropna().astype(str).unique()),
        disable_above_batch=_int_or_none(row.speculative_disable_above_batch),
        depth_schedule=isinstance(row.speculative_depth, str),
        adaptive=_true(row.speculative_adaptive),
        conversations=conversational)


def extrapolated(data: RunData) -> list[tuple[Any, str]]:
    """Simulated cells outside their engine's calibrated envelope (`Modeller.envelope`, the one
    the plan asks; the profile named by the cell's recorded engine options, as it is now), with
    why. A cell recorded without engine options (a run folder from before that column) is not
    judged: unknown."""
    from grid.store.loader import load_requests

    cells = data.cells
    if not len(cells) or "engine_options" not in cells or cells.engine_options.isna().all():
        return []
    sim = cells[cells.simulated.fillna(False).astype(bool)]
    if not len(sim):
        return []
    # in a stable order, whatever order the store hands the cells in
    sim = sim.sort_values([c for c in ("variant", "workload", "concurrency", "rate", "repeat")
                           if c in sim], kind="stable")
    columns = ["cell_id", "status", "input_tokens", "output_tokens", "domain"]
    try:
        reqs = load_requests(data.run_dir, columns=columns)
    except Exception:  # noqa: BLE001 - damaged files are reported above
        reqs = pd.DataFrame(columns=columns)
    reqs = reqs[reqs.status == "ok"]
    # The running batch whatever the server calls it (grid/report/serverdata.py): for a
    # rate-driven cell, the concurrency the envelope is checked at.
    gauge = data.server_gauges
    running = (gauge[gauge.role == "running"].groupby("cell_id").value.mean()
               if len(gauge) and "role" in gauge else pd.Series(dtype=float))
    conversations = set(data.turns.cell_id) if len(data.turns) else set()
    found = []
    for row in sim.itertuples():
        model = engines.modeller(row.engine)
        if model is None or not isinstance(row.engine_options, str):
            continue  # an engine that is gone, or a cell from before the column
        scenario = _scenario(row, reqs[reqs.cell_id == row.cell_id], running,
                             str(row.cell_id) in conversations)
        try:
            finding = model.envelope(json.loads(row.engine_options), scenario)
        except ValueError:
            continue  # the profile it names is gone or unusable now
        if finding is not None and finding.outside:
            found.append((row, "; ".join(finding.outside)))
    return found


NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?")
"""The first number or range of a reason (`96` output tokens, prompts of `30-627` tokens)."""


def merged_reasons(whys: list[str]) -> str:
    """The cells' reasons (`; `-joined clauses) as one: each clause once, the numbers that
    differ from cell to cell as their overall range (`prompts of 30-627 tokens outside 128`)."""
    spans: dict[str, tuple[float, float] | None] = {}
    for why in whys:
        for clause in why.split("; "):
            m = NUMBER.search(clause)
            if m is None:
                spans.setdefault(clause, None)
                continue
            key = f"{clause[:m.start()]}\0{clause[m.end():]}"
            lo, hi = float(m.group(1)), float(m.group(2) or m.group(1))
            seen = spans.get(key)
            spans[key] = (lo, hi) if seen is None else (min(seen[0], lo), max(seen[1], hi))
    out = []
    for key, span in spans.items():
        if span is None:
            out.append(key)
            continue
        low, high = (f"{x:g}" for x in span)
        out.append(key.replace("\0", low if low == high else f"{low}-{high}"))
    return "; ".join(out)


def extrapolation_line(found: list[tuple[Any, str]]) -> str:
    """One line for every extrapolated cell, each server named once with its workloads and
    loads (`baseline on coding at c=1,4; eagle3 on coding at c=1,4 (96 output tokens outside
    256)`); the reasons once when every server shares them (numbers as their overall range),
    else after each server."""
    servers: dict[str, dict[str, list[Any]]] = {}
    whys: dict[str, list[str]] = {}
    for r, why in found:
        servers.setdefault(str(r.variant), {}).setdefault(str(r.workload), []).append(r)
        whys.setdefault(str(r.variant), []).append(why)
    named = {server: f"{server} " + ", ".join(f"on {workload} at {' '.join(_load_list(rows))}"
                                              for workload, rows in by_workload.items())
             for server, by_workload in servers.items()}
    reasons = {server: merged_reasons(w) for server, w in whys.items()}
    # the same reasons but for their numbers (each server's prompts span other lengths): once
    if len({NUMBER.sub("#", r) for r in reasons.values()}) == 1:
        listed = f"{'; '.join(named.values())} ({merged_reasons(list(reasons.values()))})"
    else:
        listed = "; ".join(f"{n} ({reasons[s]})" for s, n in named.items())
    return (f"extrapolation: {len(found)} simulated cell(s) outside their profile's calibrated "
            f"envelope (docs/simulator.md 'Calibrated envelope'): {listed}")


def _load_list(rows: list[Any]) -> list[str]:
    """`c=1,4,16` and `2/s,4/s`, each ascending."""
    closed = sorted({int(r.concurrency) for r in rows if _load(r).startswith("c=")
                     and _load(r) != "c=?"})
    rates = sorted({float(r.rate) for r in rows if not _load(r).startswith("c=")})
    return ([f"c={','.join(map(str, closed))}"] if closed else []) + \
        ([",".join(f"{x:g}/s" for x in rates)] if rates else [])


def run_findings(data: RunData) -> list[tuple[str, str]]:
    """What limits the whole run: where its numbers come from, extrapolation, damaged files."""
    out: list[tuple[str, str]] = []
    if data.simulated:
        out.append(("warning", data.sim_banner()))
    outside = extrapolated(data) if data.simulated else []
    if outside:
        out.append(("warning", extrapolation_line(outside)))
    if data.on_cpu:
        out.append(("warning", data.cpu_banner()))
    if data.damaged:
        shown = "; ".join(data.damaged[:8])
        more = len(data.damaged) - 8
        out.append(("warning", f"{len(data.damaged)} damaged file(s), their cells left out of "
                               f"this report: {shown}" + (f" and {more} more" if more > 0
                                                          else "")
                               + f"; python -m grid.status {data.run_dir} --verify checks "
                                 "every file, and running the run's command again measures "
                                 "the damaged cells again"))
    return out


def _names(frame: pd.DataFrame) -> str:
    shown = [f"{r.variant} {_load(r)}" for r in frame.itertuples()][:8]
    more = len(frame) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def cell_findings(data: RunData, table: pd.DataFrame) -> list[tuple[str, str]]:
    """What limits some cells, one line per kind."""
    out: list[tuple[str, str]] = []
    conversation_ids = set(data.turns.cell_id) if len(data.turns) else set()
    saturated = table[table.client_saturated.fillna(False).astype(bool)]
    if len(saturated):
        out.append(("warning", f"client saturated in {len(saturated)} cell(s) (latency there "
                               f"includes the client's own delay): {_names(saturated)}"))
    out += server_clock_check(data.cells)
    failed = table[table.status != "done"]
    if len(failed):
        out.append(("warning", f"{len(failed)} cell(s) not done (left out of every "
                               f"comparison): {_names(failed)}"))
    errors = table[(table.status == "done") & (table.requests_error.fillna(0) > 0)]
    if len(errors):
        out.append(("warning", f"{len(errors)} cell(s) with request errors: {_names(errors)}"))
    versions = engine_versions(table)
    if len(versions) > 1:
        out.append(("warning", "cells of several engine versions in this run ("
                    + ", ".join(versions)
                    + "): the cells table names each cell's version; compare versions with "
                      "python -m grid.report RUN_A RUN_B"))
    off = off_distribution(data)
    if off:
        out.append(("warning", off))
    elif not (_recorded(data.requests, ALIGNMENT) or _recorded(data.cells, ALIGNMENT)):
        out.append(("note", "workload alignment with the drafter's training distribution "
                            "was not recorded in this run"))
    loose = table[table.get("loose_interval", pd.Series(False, index=table.index))
                  .fillna(False).astype(bool) & (table.status == "done")]
    if len(loose):
        out.append(("warning", f"too few requests for a tight interval (throughput ±10 % or "
                               f"fewer than 10 requests in the steady window) in "
                               f"{len(loose)} cell(s): {_names(loose)}; raise "
                               f"load.requests_per_stream"
                               + (" (conversation cells: more rounds, workload."
                                  "num_conversations / workload.max_turns)"
                                  if loose.cell_id.isin(conversation_ids).any() else "")))
    out += stop_findings(data.cells)
    return out + cell_notes(data, table, conversation_ids)


def cell_notes(data: RunData, table: pd.DataFrame, conversation_ids: set
               ) -> list[tuple[str, str]]:
    """What the reader should know about some cells, not a fault."""
    out: list[tuple[str, str]] = []
    if len(conversation_ids):
        out.append(("note", f"{len(conversation_ids)} conversation cell(s): their requests are "
                            "the rounds sent; intervals resample rounds as if independent, but "
                            "the rounds of one conversation share its growing context, so "
                            "these intervals are likely too narrow"))
    unsteady = table[(table.get("steady", pd.Series(True, index=table.index)) == False)  # noqa: E712
                     & (table.status == "done")]
    if len(unsteady):
        out.append(("note", f"no steady state (one wave of requests) in {len(unsteady)} "
                            f"cell(s): their window is the whole span: {_names(unsteady)}"))
    repeats = table.groupby(["variant", "workload", "concurrency", "rate"], dropna=False
                            ).repeat.nunique()
    if (repeats > 1).any():
        out.append(("note", f"repeated cells: up to {int(repeats.max())} repeats per point; "
                            "points average them and the spread is shown"))
    if data.telemetry.empty or (data.telemetry.metric == "unavailable").all():
        note = "GPU telemetry unavailable (no NVML on the node)"
        if len(data.telemetry):
            note += f": {data.telemetry.note.dropna().iloc[0]}"
        out.append(("note", note))
    return out


def validity(data: RunData) -> list[tuple[str, str]]:
    """What limits the evidence, most important first, one line per kind."""
    out = run_findings(data)
    table = data.stats.table
    if table.empty:
        return out + [("warning", "no committed cells")]
    return out + cell_findings(data, table)


def _int_or_none(value: Any) -> int | None:
    """A nullable integer column's value: None where it is unset (NaN, None, NA)."""
    return None if value is None or pd.isna(value) else int(value)


def _true(value: Any) -> bool:
    """A nullable boolean column's value: False where it is unset (NaN, None, NA)."""
    return value is not None and not pd.isna(value) and bool(value)


def _recorded(frame: pd.DataFrame, column: str) -> bool:
    """The column exists and holds at least one value (cells of workloads without a drafter
    check leave it null)."""
    return column in frame and bool(frame[column].notna().any())


def off_distribution(data: RunData) -> str | None:
    """Cells whose prompts were not all on the drafter's training distribution (when the
    workload recorded `alignment_ok` per request)."""
    cells = data.cells
    if ALIGNMENT in cells and len(cells):
        off_cells = cells[(cells.status == "done") & (cells[ALIGNMENT] == False)]  # noqa: E712
        if len(off_cells):
            return (f"off-distribution workload (not matching the drafter's training data) in "
                    f"{len(off_cells)} cell(s): acceptance there measures the mismatch, not "
                    f"the method")
    if not _recorded(data.requests, ALIGNMENT):
        return None
    req = data.requests[data.requests.status == "ok"]
    share = req.groupby("cell_id")[ALIGNMENT].apply(lambda s: float((s == False).mean()))  # noqa: E712
    bad = share[share > 0]
    if bad.empty:
        return None
    return (f"off-distribution prompts (not matching the drafter's training data) in "
            f"{len(bad)} cell(s), up to {100 * bad.max():.0f} % of their requests: acceptance "
            f"there measures the mismatch, not the method")


def _load(row: object) -> str:
    rate = getattr(row, "rate", None)
    if rate is None or pd.isna(rate):
        concurrency = getattr(row, "concurrency", None)
        return "c=?" if concurrency is None or pd.isna(concurrency) else f"c={int(concurrency)}"
    return f"{rate:g}/s"
