"""The grid side of conversation workloads (`workload.kind=conversations`, docs/agentic.md): the
conversation file read at plan time and each cell's ConversationLoadSpecs (what one attempt
leaves: grid/store/rows.py). Everything wrong with the input raises ValueError with one
line before Ray or any server starts. Pure: no Ray, no sockets, nothing written."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from actors.loadgen.conversation_plan import (
    ConversationLoadSpec,
    arrival_offsets,
    think_times,
)
from engines.planning import ConversationWork
from grid.plan.cells import Cell
from grid.plan.config import ConfigError
from grid.plan.specs import clock_scale
from workloads.conversations.loaders import load_conversations
from workloads.conversations.model import Conversation, estimate_tokens, message_text
from workloads.conversations_data import DATA_DIR

CONVERSATION_SET_FIELDS = ("name", "kind", "conversations", "format", "num_conversations")
"""The workload fields that decide which conversations a workload replays."""


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
            keepalive_s=float(load["keepalive_s"]), seed=int(load["seed"]),
            clock_scale=clock_scale(config["engine"]))
        return tuple(
            replace(base, conversations=tuple(conversations[i::clients]), seed=base.seed + i,
                    concurrency=None if total is None
                    else int(total) // clients + (1 if i < int(total) % clients else 0))
            for i in range(clients))
    except ValueError as e:
        raise ConfigError(str(e) + where) from None


def conversation_work(specs: Sequence[ConversationLoadSpec]) -> ConversationWork:
    """The work of one conversation cell: its clients' specs summed (engines/planning.py
    ConversationWork, what an engine's estimate of the cell reads)."""
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
