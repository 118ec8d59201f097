"""What limits a run's evidence, most important first: the report's validity section
(simulation or CPU banners, extrapolated cells, saturated clients, failed cells, several engine
versions, off-distribution prompts, loose intervals, ...)."""

from __future__ import annotations

import json
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
                     f"{cells.ttft_minus_server_p99_s.max() * 1e3:.1f} ms, {len(p50)} cells)")]


def validity(data: RunData) -> list[tuple[str, str]]:
    """What limits the evidence, most important first."""
    out: list[tuple[str, str]] = []
    table = data.stats.table
    if data.simulated:
        out.append(("warning", data.sim_banner()))

    def extrapolated() -> list[tuple[Any, str]]:
        """Simulated cells outside their engine's calibrated envelope (`Modeller.envelope`, the
        one the plan asks; the profile named by the cell's recorded engine options, as it is
        now), from what the run recorded: concurrency (an open-loop cell: its mean running
        batch from the server's gauge), the most output tokens and the shortest and longest
        prompt of its requests (server-counted), its variant's args and speculation threshold
        and its prompts' domains. A cell recorded without engine options (a run folder from
        before that column) is not judged: unknown."""
        import numbers

        from grid.store.loader import load_requests

        cells = data.cells
        if not len(cells) or "engine_options" not in cells or cells.engine_options.isna().all():
            return []
        sim = cells[cells.simulated.fillna(False).astype(bool)]
        if not len(sim):
            return []
        try:
            reqs = load_requests(data.run_dir, columns=["cell_id", "status", "input_tokens",
                                                        "output_tokens", "domain"])
        except Exception:  # noqa: BLE001 - damaged files are reported above
            reqs = pd.DataFrame(columns=["cell_id", "status", "input_tokens",
                                         "output_tokens", "domain"])
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
            mine = reqs[reqs.cell_id == row.cell_id]
            cid, given = str(row.cell_id), row.concurrency
            concurrency = float(given) if isinstance(given, numbers.Real) and given == given \
                else (round(float(running[cid]), 1) if cid in running else None)
            lengths = mine.input_tokens.dropna()
            outputs = mine.output_tokens.dropna()
            scenario = Scenario(
                args=json.loads(row.server_args) if isinstance(row.server_args, str) else {},
                concurrency=concurrency,
                output_tokens=int(outputs.max()) if len(outputs) else None,
                prompt_tokens=(int(lengths.min()), int(lengths.max())) if len(lengths) else None,
                domains=sorted(mine.domain.dropna().astype(str).unique()),
                disable_above_batch=_int_or_none(row.speculative_disable_above_batch),
                depth_schedule=isinstance(row.speculative_depth, str),
                adaptive=_true(row.speculative_adaptive),
                conversations=cid in conversations)
            try:
                finding = model.envelope(json.loads(row.engine_options), scenario)
            except ValueError:
                continue  # the profile it names is gone or unusable now
            if finding.outside:
                found.append((row, "; ".join(finding.outside)))
        return found

    def by_group(found: list[tuple[Any, str]]) -> list[str]:
        """One clause per server group and workload with the same reasons, its loads listed:
        `eagle3 on coding at c=1, 4, 16 (96 output tokens outside 256)`."""
        groups: dict[tuple[str, str, str], list[str]] = {}
        for r, why in found:
            groups.setdefault((str(r.variant), str(r.workload), why), []).append(_load(r))
        return [f"{variant} on {workload} at {', '.join(loads)} ({why})"
                for (variant, workload, why), loads in groups.items()]

    outside = extrapolated() if data.simulated else []
    if outside:
        clauses = by_group(outside)
        shown = "; ".join(clauses[:8]) + (f" and {len(clauses) - 8} more"
                                          if len(clauses) > 8 else "")
        out.append(("warning", f"extrapolation: {len(outside)} simulated cell(s) outside the "
                               "calibrated envelope of their hardware x model profile (the "
                               "scenarios its published anchor covers, docs/simulator.md "
                               f"'Calibrated envelope'): {shown}"))
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
    if table.empty:
        return out + [("warning", "no committed cells")]

    def names(frame: pd.DataFrame) -> str:
        shown = [f"{r.variant} {_load(r)}" for r in frame.itertuples()][:8]
        more = len(frame) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    conversation_ids = set(data.turns.cell_id) if len(data.turns) else set()
    saturated = table[table.client_saturated.fillna(False).astype(bool)]
    if len(saturated):
        out.append(("warning", f"client saturated in {len(saturated)} cell(s) (latency there "
                               f"includes the client's own delay): {names(saturated)}"))
    out += server_clock_check(data.cells)
    failed = table[table.status != "done"]
    if len(failed):
        out.append(("warning", f"{len(failed)} cell(s) not done (left out of every "
                               f"comparison): {names(failed)}"))
    errors = table[(table.status == "done") & (table.requests_error.fillna(0) > 0)]
    if len(errors):
        out.append(("warning", f"{len(errors)} cell(s) with request errors: {names(errors)}"))
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
                               f"{len(loose)} cell(s): {names(loose)}; raise "
                               f"load.requests_per_stream"
                               + (" (conversation cells: more rounds, workload."
                                  "num_conversations / workload.max_turns)"
                                  if loose.cell_id.isin(conversation_ids).any() else "")))
    out += stop_findings(data.cells)
    if len(conversation_ids):
        out.append(("note", f"{len(conversation_ids)} conversation cell(s): their requests are "
                            "the rounds sent; intervals resample rounds as if independent, but "
                            "the rounds of one conversation share its growing context, so "
                            "these intervals are likely too narrow"))
    unsteady = table[(table.get("steady", pd.Series(True, index=table.index)) == False)  # noqa: E712
                     & (table.status == "done")]
    if len(unsteady):
        out.append(("note", f"no steady state (one wave of requests) in {len(unsteady)} "
                            f"cell(s): their window is the whole span: {names(unsteady)}"))
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
