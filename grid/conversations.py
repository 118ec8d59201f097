"""The grid side of conversation workloads (`workload.kind=conversations`, docs/agentic.md): the
conversation file read at plan time, each cell's ConversationLoadSpecs, and what one attempt
leaves (its turn rows and cell row). Everything wrong with the input raises ValueError with one
line before Ray or any server starts. Pure: no Ray, no sockets, nothing written."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from actors.loadgen.conversation import ConversationResult
from actors.loadgen.conversation_plan import (
    ROW_KEYS,
    ConversationLoadSpec,
    arrival_offsets,
    think_times,
)
from grid import rows as cell_rows
from grid.cells import Cell
from grid.config import ConfigError
from grid.metrics import summarize_cell
from grid.rows import CellOutcome, ServerFacts
from workloads.conversations.loaders import load_conversations
from workloads.conversations.model import Conversation, estimate_tokens, message_text
from workloads.conversations_data import DATA_DIR

CONVERSATION_SET_FIELDS = ("name", "kind", "conversations", "format", "num_conversations")
"""The workload fields that decide which conversations a workload replays."""
SENT = ("ok", "error")
"""Statuses of rounds that were sent (skipped / not_run rounds never reached the server)."""


@dataclass
class ConversationSet:
    """A conversation workload's conversations, as read at plan time."""

    name: str
    conversations: tuple[Conversation, ...]
    digest: str
    """Content digest of the file (and its format / limit): part of every cell id."""
    description: str
    """The loader's report: conversations, format, malformed records."""
    notes: list[str] = field(default_factory=list)
    """Malformed records skipped: printed as plan warnings."""


def conversations_path(name: str) -> Path:
    """A relative name that exists in workloads/conversations_data/ is shipped data; any other
    name is a path."""
    path = Path(name)
    if path.is_absolute():
        return path
    shipped = DATA_DIR / path
    return shipped if shipped.exists() else path


def conversation_set_key(workload: Mapping[str, Any]) -> str:
    """Equal for two workload configs that replay the same conversations."""
    return json.dumps({k: workload.get(k) for k in CONVERSATION_SET_FIELDS}, sort_keys=True,
                      default=str)


def is_conversations(workload: Mapping[str, Any]) -> bool:
    return workload.get("kind") == "conversations"


def load_conversation_set(workload: Mapping[str, Any]) -> ConversationSet:
    """Read the workload's conversation file (streaming, the first `num_conversations`).
    ValueError (one line) when it is missing, unreadable or in no known format."""
    name = str(workload["name"])
    if not workload.get("conversations"):
        raise ValueError(f"workload {name!r}: kind=conversations needs workload.conversations "
                         "(a file in workloads/conversations_data/ or a path)")
    path = conversations_path(str(workload["conversations"]))
    if not path.is_file():
        raise ValueError(f"workload {name!r}: conversation file {path} not found")
    limit = workload.get("num_conversations")
    if limit is not None and int(limit) < 1:
        raise ValueError(f"workload {name!r}: num_conversations must be >= 1, got {limit}")
    fmt = str(workload.get("format") or "auto")
    convs, report = load_conversations(path, fmt, None if limit is None else int(limit))
    digest = hashlib.sha256()
    digest.update(json.dumps([fmt, limit]).encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    notes = [f"workload {name}: {report.summary()}"] if report.malformed else []
    return ConversationSet(name, tuple(convs), digest.hexdigest()[:16], report.summary(), notes)


def conversation_specs(cell: Cell, conversations: Sequence[Conversation],
                       url: str) -> tuple[ConversationLoadSpec, ...]:
    """One ConversationLoadSpec per client: the conversations dealt round-robin, the cell's
    concurrency (conversations in flight) split as evenly as possible. A rate cell is open loop
    at `load.rate` conversations/s, `load.arrival=trace` at the trace's own times (both capped
    by `load.max_in_flight`). `load.warmup_requests` does not apply (every round is measured).
    ConfigError naming the cell when a spec is invalid."""
    config = cell.config
    load, workload, model = config["load"], config["workload"], config["model"]
    clients = int(load["clients"])
    where = f" (cell {cell.describe()})"
    open_loop = load.get("rate") is not None or load["arrival"] == "trace"
    if len(conversations) < clients:
        raise ConfigError(f"{len(conversations)} conversations cannot be dealt to "
                          f"load.clients={clients}{where}")
    total = load.get("max_in_flight") if open_loop else load.get("concurrency")
    if total is not None and int(total) < clients:
        raise ConfigError(f"{'load.max_in_flight' if open_loop else 'load.concurrency'}="
                          f"{total} is below load.clients={clients}{where}")
    try:
        base = ConversationLoadSpec(
            url=url, conversations=tuple(conversations), endpoint=workload["endpoint"],
            concurrency=None if total is None else int(total), rate=load.get("rate"),
            arrival=load["arrival"], burstiness=float(load["burstiness"]),
            time_scale=float(workload["time_scale"]), think_time=workload["think_time"],
            think_time_s=float(workload["think_time_s"]), replay=workload["replay"],
            template=workload["template"], max_turns=workload.get("max_turns"),
            duration_s=load.get("duration_s"), max_new_tokens=int(workload["max_new_tokens"]),
            temperature=float(workload["temperature"]), ignore_eos=bool(workload["ignore_eos"]),
            request_timeout_s=float(load["request_timeout_s"]),
            model=model.get("served_model_name") or model["model_path"],
            api_key=config["engine"].get("api_key"), transport=load["transport"],
            tls_verify=bool(load["tls_verify"]), ca_bundle=load["ca_bundle"],
            keepalive_s=float(load["keepalive_s"]), seed=int(load["seed"]))
        return tuple(
            replace(base, conversations=tuple(conversations[i::clients]), seed=base.seed + i,
                    concurrency=None if total is None
                    else int(total) // clients + (1 if i < int(total) % clients else 0))
            for i in range(clients))
    except ValueError as e:
        raise ConfigError(str(e) + where) from None


@dataclass(frozen=True)
class ConversationWork:
    """What a conversation cell's load will send, counted from its planned specs (the rounds
    each client replays: ``num_conversations`` and ``max_turns`` applied)."""

    conversations: int
    rounds: int
    """Σ over conversations of the rounds replayed: the cell's requests."""
    output_tokens: int
    """Σ of each round's output length (the trace's, else ``max_new_tokens``)."""
    new_tokens: int
    """Σ of each round's new context (its messages; round 0 also the system prompt and tool
    schemas), estimated as characters / 4: what prefill computes when the rest of the history
    comes from the prefix cache."""
    think_s: float
    """Σ of the think times before rounds (the runner's own seeded schedule)."""
    open_loop: bool
    """Conversations start at a rate or at the trace's times (not a fixed number in flight)."""
    last_arrival_s: float
    """Open loop: offset of the last conversation's start (0 in a closed loop)."""


def conversation_work(specs: Sequence[ConversationLoadSpec]) -> ConversationWork:
    """The work of one conversation cell: its clients' specs summed."""
    convs = rounds = output = new = 0
    think = last = 0.0
    open_loop = False
    for spec in specs:
        open_loop = open_loop or not spec.closed_loop
        selected = spec.selected()
        convs += len(selected)
        for index, conv in enumerate(selected):
            n = spec.turns_of(conv)
            rounds += n
            think += sum(think_times(spec, conv, index))
            for k, turn in enumerate(conv.turns[:n]):
                output += turn.output_tokens or spec.max_new_tokens
                chars = sum(len(message_text(m)) for m in turn.messages)
                if k == 0:
                    chars += len(conv.system or "") + (
                        len(json.dumps(list(conv.tools), default=str)) if conv.tools else 0)
                new += estimate_tokens(chars)
        if not spec.closed_loop and selected:
            last = max(last, max(arrival_offsets(spec, selected)))
    return ConversationWork(convs, rounds, output, new, think, open_loop, last)


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


def turn_row(run_id: str, cell: Cell, attempt: int, row: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in ROW_KEYS}
    engine = cell.config["engine"]["name"]
    out.update(run_id=run_id, cell_id=cell.cell_id, attempt=attempt, engine=engine,
               simulated=engine == "sim", concurrency=cell.concurrency, rate=cell.rate)
    return out


def measured(run_id: str, cell: Cell, attempt: int, *, started: float, finished: float,
             results: Sequence[ConversationResult],
             samples: Sequence[tuple[float, str, dict[str, str], float]],
             server: ServerFacts, server_death: str | None, log_tail: str | None,
             max_error_rate: float) -> CellOutcome:
    """The outcome of a conversation cell whose load ran (as grid.rows.measured for prompt
    cells): aggregates over the rounds that were sent (grid.metrics.summarize_cell: a round is
    a request; error_rate counts `error` rounds, not `skipped` / `not_run`), the prefix-cache
    hit rate, and every round as a turn row."""
    turns = [row for result in results for row in result.rows]
    sent = [r for r in turns if r["status"] in SENT]
    starts = [float(res.stats["window_start"]) for res in results]
    ends = [s + float(res.stats["window_s"]) for s, res in zip(starts, results, strict=True)]
    window_s = max(max(ends, default=0.0) - min(starts, default=0.0), 1e-9)
    summary = summarize_cell(sent, window_s)  # dispatch lag from the rows
    status, error = "done", None
    if server_death:
        status, error = "failed", server_death
    elif summary["error_rate"] > max_error_rate:
        first = next((r["error"] for r in sent if r["status"] != "ok"), None)
        status = "failed"
        error = (f"error rate {summary['error_rate']:.0%} above run.max_error_rate "
                 f"{max_error_rate:.0%}; first error: {first}")
    row = cell_rows.cell_row(run_id, cell, attempt, status=status, error=error, started=started,
                             finished=finished, server=server)
    row.update(summary)
    row["num_requests"] = len(turns)
    row["cache_hit_rate"] = cache_hit_rate(turns)
    row["transport"] = cell.config["load"]["transport"]
    outcome = CellOutcome(status, error, log_tail, row,
                          metrics=cell_rows.metric_rows(run_id, cell, attempt, samples))
    outcome.turns = [turn_row(run_id, cell, attempt, r) for r in turns]
    return outcome
