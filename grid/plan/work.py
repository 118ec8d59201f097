"""What one cell runs, decided once by the plan: `PlannedCell` holds everything execution needs
(the clients' load specs, the progress total, the stall bounds, the workload columns of its
rows, the settings its rows record and the label of where its numbers come from), so that
running a cell reads nothing else, the raw config is read no further than here, and the store
turns its outcome into rows without opening a file. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import engines
from actors.loadgen.conversation_plan import ConversationLoadSpec, longest_wait_s
from actors.loadgen.spec import LoadSpec, Prompt
from actors.probe import ServerAccess
from engines.forced import forced_record
from engines.metrics import MetricNames
from engines.planning import ConversationWork
from engines.redact import redact_args
from grid.plan.cells import Cell
from grid.plan.conversations import conversation_specs, conversation_work
from grid.plan.specs import PLANNED_URL, external_url, load_specs
from grid.plan.stopping import targets_of
from grid.plan.workloads import CellAlignment, WorkloadPlan, cell_columns, request_columns
from specgrid_metrics.precision import Target

ClientSpec = LoadSpec | ConversationLoadSpec
"""What one load generator is asked to run: prompts or conversations (actors/loadgen/actor.py
takes either through the same `prepare` / `run`)."""


@dataclass(frozen=True)
class Bounds:
    """The bounds of a cell's load (grid/execute/stall.py turns them into its stall watch)."""

    request_timeout_s: float
    """load.request_timeout_s: the most one request may take, start to end."""
    longest_wait_s: float
    """The longest the cell's own schedule leaves all its clients with nothing to send (an
    open loop's widest arrival gap, a conversation's longest think time; 0 for a closed loop
    of prompts)."""
    cap_s: float | None
    """run.cell_timeout_s: a cap on the whole load (None: bounded by its progress only)."""


@dataclass(frozen=True)
class PlannedCell:
    """One cell as execution runs it."""

    cell: Cell
    clients: tuple[ClientSpec, ...]
    """One spec per load generator, aimed at the planned URL (`at` aims them at a server)."""
    unit: Literal["requests", "rounds"]
    """What the progress display counts: a prompt cell's requests, a conversation cell's
    rounds."""
    total: int
    """How many of them the cell measures (a cap when precision targets stop it earlier)."""
    bounds: Bounds
    source: str
    """Where the cell's numbers come from, as every table and figure labels them
    (`source_label`)."""
    cell_columns: dict[str, Any] = field(default_factory=dict)
    """The workload's alignment with the drafter (speculative cells), for the cell row."""
    request_columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    """prompt_id -> its `source` and `nearest_train_similarity`, for the request rows."""
    conversation: ConversationWork | None = None
    """A conversation cell's work, counted from its specs (the estimate reads it)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The cell row's settings columns (`settings_columns`: engine, model, flags, forced
    acceptance, device), the first two on every request row too."""
    endpoint: str = "generate"
    """workload.endpoint."""
    transport: str = "raw"
    """load.transport."""
    metrics: MetricNames | None = None
    """The engine's metric names (engines/metrics.py), what its /metrics deltas are read by."""
    targets: tuple[Target, ...] = ()
    """load.target: the precision targets the stop columns judge."""
    server: ServerSettings | None = None
    """How its server group reaches and starts its server (the same for every cell of a
    group)."""

    @property
    def conversations(self) -> bool:
        return self.unit == "rounds"

    def at(self, url: str, api_key: str | None) -> list[ClientSpec]:
        """The clients' specs aimed at a running server, with the API key it expects."""
        return [replace(spec, url=url, api_key=api_key) for spec in self.clients]


def plan_cell(cell: Cell, workloads: WorkloadPlan, cap_s: float | None, source: str
              ) -> PlannedCell:
    """The cell's work (ConfigError naming the cell when a load spec is invalid); `source` is
    its server group's `source_label`, asked once per group."""
    config = cell.config
    request_timeout_s = float(config["load"]["request_timeout_s"])

    def planned(clients: tuple[ClientSpec, ...], unit: Literal["requests", "rounds"],
                total: int, wait_s: float, **workload: Any) -> PlannedCell:
        return PlannedCell(
            cell, clients, unit, total, Bounds(request_timeout_s, wait_s, cap_s), source,
            settings=settings_columns(config), endpoint=str(config["workload"]["endpoint"]),
            transport=str(config["load"]["transport"]),
            metrics=engines.get(config["engine"]["name"]).metrics,
            targets=targets_of(config["load"]), server=server_settings(config), **workload)

    convs = workloads.conversations.get(cell.workload_name)
    if convs is not None:
        specs = conversation_specs(cell, convs.conversations, PLANNED_URL)
        work = conversation_work(specs)
        return planned(specs, "rounds", work.rounds, longest_wait_s(specs), conversation=work)
    prompts = workloads.prompts[cell.workload_name]
    loads = load_specs(cell, prompts)
    alignment = workloads.alignments.get(cell.cell_id)
    return planned(loads, "requests", cell.num_requests, loads[0].longest_wait_s(),
                   cell_columns=cell_columns(alignment),
                   request_columns=_request_columns(
                       prompts, workloads.sources(cell.workload_name), alignment))


@dataclass(frozen=True)
class ServerSettings:
    """What running a group's server reads of its config."""

    access: ServerAccess
    """TLS settings and key for every call to the server (load.tls_verify, load.ca_bundle,
    engine.api_key)."""
    external_url: str | None
    """A server someone else runs: its URL (None: the engine launches one)."""
    ready_timeout_s: float
    """engine.ready_timeout_s."""
    variant_env: dict[str, Any]
    """variant.env: the server's environment."""
    client_cpus: float
    """load.client_cpus: CPUs each load generator reserves."""


def server_settings(config: Mapping[str, Any]) -> ServerSettings:
    engine = config["engine"]
    return ServerSettings(ServerAccess.from_config(config), external_url(engine),
                          float(engine["ready_timeout_s"]), dict(config["variant"]["env"]),
                          float(config["load"]["client_cpus"]))


def settings_columns(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a cell row records of the cell's settings (grid.store.schema.CELL_FIELDS): the
    engine and whether it is simulated, the model, temperature, the engine's options and the
    variant's flags (secret values redacted), its speculation settings, forced acceptance and
    device."""
    engine, variant = config["engine"], config["variant"]
    kind = engines.get(engine["name"])
    depth = variant.get("speculative_depth")
    try:
        forced = forced_record(variant)
    except ValueError:  # refused in the engine's words once the plan builds its launch
        forced = None
    return {
        "engine": engine["name"], "simulated": kind.simulated, "model": config["model"]["name"],
        "temperature": float(config["workload"]["temperature"]),
        "engine_options": _json(engine.get("options") or {}),
        "server_args": _json(variant.get("args") or {}),
        "speculative_disable_above_batch": variant.get("speculative_disable_above_batch"),
        "speculative_depth": None if depth is None else json.dumps([list(t) for t in depth]),
        "speculative_adaptive": bool(variant.get("speculative_adaptive")),
        "forced_acceptance": forced,
        "device": engine.get("device") or "cuda" if kind.launches else None,
    }


def _json(value: Mapping[str, Any]) -> str:
    """Settings as the cell records them: canonical JSON, the values of secret flags
    (api_key, hf_token) redacted."""
    return json.dumps(redact_args(value), sort_keys=True, default=str)


def _request_columns(prompts: tuple[Prompt, ...], sources: Mapping[str, str | None],
                     alignment: CellAlignment | None) -> dict[str, dict[str, Any]]:
    return {p.prompt_id: request_columns(sources, alignment, p.prompt_id) for p in prompts}


def source_label(config: Mapping[str, Any]) -> str:
    """Where a cell's numbers come from, as every table, figure and banner names it:
    SIMULATION (the simulator), a real engine on a CPU (with the project's tiny model) or on
    GPUs, or a server someone else runs."""
    kind = engines.get(config["engine"]["name"])
    model = engines.modeller(kind.name)
    if model is not None:  # e.g. "SIMULATION (twin of RUN)" on a twin's profile (docs/twin.md)
        note = model.provenance(config["engine"].get("options") or {})
        return f"SIMULATION ({note})" if note else "SIMULATION"
    if not kind.launches:
        return "external server"
    if (config["engine"].get("device") or "cuda") == "cpu":
        tiny = {"tiny": ", tiny model", "tiny_trained": ", tiny trained models"}.get(
            str(config["model"]["name"]), "")
        return f"real engine, CPU{tiny}"
    return "real engine, GPU"
