"""What one cell attempt leaves: its cell row (identity, status, aggregates, provenance),
its request rows (a conversation cell's turn rows), its server-metric and telemetry rows,
assembled here and nowhere else, in one pass over what the cell's clients and server handed
back and what the plan decided (grid/plan/work.py PlannedCell: the workload columns and the
source label). Pure: no Ray, no files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.loadgen.conversation_plan import ROW_KEYS
from actors.loadgen.spec import LoadResult
from grid.plan.cells import Cell
from grid.plan.work import PlannedCell
from grid.store.clientstats import cell_columns as client_columns
from grid.store.clientstats import merge_client_stats
from grid.store.ledger import Status
from grid.store.provenance import redact_info
from grid.store.stopping import stop_columns
from specgrid_metrics.counters import Sample
from specgrid_metrics.requests import summarize_cell

SENT = ("ok", "error")
"""Statuses of rounds that were sent (skipped / not_run rounds never reached the server)."""


@dataclass(frozen=True)
class ServerFacts:
    """What a cell records about the server that served it (empty for none)."""

    command: str | None = None
    """The command line as started, secrets redacted."""
    env: str | None = None
    """JSON of the recorded environment (grid.store.provenance.recorded_env)."""
    cuda_visible_devices: str | None = None
    gpu_ids: str | None = None
    """The GPU ids Ray assigned the server's actor, comma-separated."""
    node_id: str | None = None
    """The Ray node the server ran on."""
    node_ip: str | None = None
    hostname: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    """The server's /server_info snapshot (secrets redacted when recorded)."""
    offers: dict[str, Any] = field(default_factory=dict)
    """What a server someone else runs offers, as detected (engines/detect.py)."""
    started_at: float | None = None
    """When the process serving the cell was started (epoch s): cells with the same
    server_key and started_at share one start."""
    startup_s: float | None = None
    """Seconds from that start to the server's first ready answer."""
    startup_phases: dict[str, float] = field(default_factory=dict)
    """The start-up phases' seconds as the engine's log gives them (engines/launch.py)."""


@dataclass
class CellOutcome:
    """One attempt of one cell, ready to commit."""

    status: Status
    """done or failed."""
    error: str | None
    log_tail: str | None
    """The server's log tail when the server died or failed to start."""
    row: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    """GPU telemetry rows of the cell (grid.store.schema.TELEMETRY_FIELDS)."""
    turns: list[dict[str, Any]] = field(default_factory=list)
    """Per-round rows of a conversation cell (grid.store.schema.TURN_FIELDS)."""


def measured(run_id: str, work: PlannedCell, attempt: int, *, started: float, finished: float,
             results: Sequence[LoadResult], samples: Sequence[Sample], server: ServerFacts,
             server_death: str | None, log_tail: str | None,
             telemetry: Sequence[Mapping[str, Any]], max_error_rate: float) -> CellOutcome:
    """The outcome of a cell whose load ran, prompts or conversations alike (`results`: its
    clients'; the rows are kept either way, `judged` says when it failed). Aggregates are over
    the requests that were sent (a conversation's `skipped` / `not_run` rounds never reached
    the server); a prompt cell adds its load generator's and stop columns and one row per
    request, a conversation cell its prefix-cache hit rate and one turn row per round."""
    cell = work.cell
    rows = [row for result in results for row in result.rows]
    sent = [r for r in rows if r["status"] in SENT]
    stats = [result.stats for result in results]
    merged = None if work.conversations else merge_client_stats(stats)
    window_s = max(max((s["window_end"] for s in stats), default=0.0)
                   - min((s["window_start"] for s in stats), default=0.0), 1e-9)
    summary = summarize_cell(sent, window_s, merged)
    status, error = judged(summary, sent, server_death, max_error_rate)
    row = {**cell_row(run_id, work, attempt, status=status, error=error, started=started,
                      finished=finished, server=server), **summary, **work.cell_columns}
    outcome = CellOutcome(status, error, log_tail, row,
                          metrics=metric_rows(run_id, cell, attempt, samples),
                          telemetry=[{**s, **_ids(run_id, cell, attempt)} for s in telemetry])
    if merged is None:
        row.update(num_requests=len(rows), cache_hit_rate=cache_hit_rate(rows),
                   transport=work.transport)
        outcome.turns = [turn_row(run_id, work, attempt, r) for r in rows]
    else:
        row.update(client_columns(rows, merged, samples, work.endpoint, work.metrics))
        row.update(stop_columns(cell, work.targets, rows, stats))
        outcome.requests = [{**request_row(run_id, work, attempt, r),
                             **work.request_columns.get(r["prompt_id"], {})} for r in rows]
    row["status"], row["error"] = status.value, error
    return outcome


def judged(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
           server_death: str | None, max_error_rate: float) -> tuple[Status, str | None]:
    """(status, error) of a cell whose load ran: failed if the server died during it or the
    error ratio of its sent requests exceeds `max_error_rate`, else done."""
    if server_death:
        return Status.FAILED, server_death
    if summary["error_rate"] > max_error_rate:
        first = next((r["error"] for r in rows if r["status"] != "ok"), None)
        return Status.FAILED, (f"error rate {summary['error_rate']:.0%} above run.max_error_rate "
                          f"{max_error_rate:.0%}; first error: {first}")
    return Status.DONE, None


def failed(run_id: str, work: PlannedCell, attempt: int, *, started: float, finished: float,
           error: str, log_tail: str | None, server: ServerFacts) -> CellOutcome:
    """The outcome of a cell that could not run (or whose load could not finish)."""
    row = cell_row(run_id, work, attempt, status=Status.FAILED, error=error, started=started,
                   finished=finished, server=server)
    return CellOutcome(Status.FAILED, error, log_tail, row)


def cell_row(run_id: str, work: PlannedCell, attempt: int, *, status: Status, error: str | None,
             started: float, finished: float, server: ServerFacts) -> dict[str, Any]:
    """A cell row without aggregates (grid.store.schema.CELL_FIELDS for the columns)."""
    cell = work.cell
    reported = server.info.get("version")
    return {
        "run_id": run_id, "cell_id": cell.cell_id, "server_key": cell.server_key,
        "attempt": attempt, "status": Status(status).value, "error": error,
        **work.settings,
        "concurrency": cell.concurrency, "rate": cell.rate,
        "max_in_flight": cell.max_in_flight, "num_requests": cell.num_requests,
        "factors": json.dumps(cell.factors, default=str),
        "started_at": started, "finished_at": finished,
        "server_command": server.command, "server_env": server.env,
        "engine_version": cell.engine_version or (str(reported) if reported else None),
        "source": work.source,
        "server_info": json.dumps(redact_info(server.info), default=str) if server.info else None,
        "server_offers": json.dumps(server.offers, sort_keys=True) if server.offers else None,
        "cuda_visible_devices": server.cuda_visible_devices, "gpu_ids": server.gpu_ids,
        "node_id": server.node_id, "node_ip": server.node_ip, "hostname": server.hostname,
        "server_started_at": server.started_at, "server_startup_s": server.startup_s,
        "server_startup_phases": (json.dumps(server.startup_phases, sort_keys=True)
                                  if server.startup_phases else None),
    }


def request_row(run_id: str, work: PlannedCell, attempt: int, row: Mapping[str, Any]
                ) -> dict[str, Any]:
    return {**row, **_cell_columns(run_id, work, attempt)}


def _ids(run_id: str, cell: Cell, attempt: int) -> dict[str, Any]:
    """Which cell attempt a row belongs to."""
    return {"run_id": run_id, "cell_id": cell.cell_id, "attempt": attempt}


def _cell_columns(run_id: str, work: PlannedCell, attempt: int) -> dict[str, Any]:
    """The leading columns request rows and conversation rounds share."""
    cell = work.cell
    return {**_ids(run_id, cell, attempt), "engine": work.settings["engine"],
            "simulated": work.settings["simulated"], "concurrency": cell.concurrency,
            "rate": cell.rate}


def metric_rows(run_id: str, cell: Cell, attempt: int, samples: Sequence[Sample]
                ) -> list[dict[str, Any]]:
    return [{**_ids(run_id, cell, attempt), "scraped_at": t, "metric": name,
             "labels": json.dumps(labels, sort_keys=True), "value": value}
            for t, name, labels, value in samples]


def describe(row: Mapping[str, Any]) -> str:
    """One progress line for a committed cell row."""
    parts = [f"{row['output_tok_s']:.1f} tok/s" if row.get("output_tok_s") is not None else "",
             _ms("TTFT p50", row.get("ttft_p50_s")), _ms("TPOT p50", row.get("tpot_p50_s"))]
    if row.get("accept_length") is not None:
        parts.append(f"accept {row['accept_length']:.2f}")
    if row.get("requests_error"):
        parts.append(f"{row['requests_error']} errors")
    if row.get("client_saturated"):
        parts.append(f"CLIENT SATURATED ({row.get('saturation_reason')})")
    if row.get("stop_reason") not in (None, "count"):
        parts.append(f"stopped: {row['stop_reason']} ({row.get('stop_detail')})")
    text = ", ".join(p for p in parts if p)
    if row["status"] != "done":
        text += f" — {row['status'].upper()}: {row.get('error')}"
    return f"{text} ({row['duration_s']:.1f} s)" if row.get("duration_s") else text


def _ms(label: str, seconds: float | None) -> str:
    return "" if seconds is None else f"{label} {seconds * 1000:.1f} ms"


def cache_hit_rate(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """Prefix-cache hit rate = Σ cached_tokens / Σ context_tokens over completed rounds that
    report both (None when none does)."""
    cached = context = 0
    for r in rows:
        if r.get("status") == "ok" and r.get("cached_tokens") is not None \
                and r.get("context_tokens"):
            cached += int(r["cached_tokens"])
            context += int(r["context_tokens"])
    return cached / context if context else None


def turn_row(run_id: str, work: PlannedCell, attempt: int, row: Mapping[str, Any]
             ) -> dict[str, Any]:
    return {**{k: row.get(k) for k in ROW_KEYS}, **_cell_columns(run_id, work, attempt)}
