"""What one cell runs, decided once by the plan: `PlannedCell` holds everything execution needs
(the clients' load specs, the progress total, the stall bounds, the workload columns of its
rows and the label of where its numbers come from), so that running a cell reads nothing
else and the store turns its outcome into rows without opening a file. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import engines
from actors.loadgen.conversation_plan import ConversationLoadSpec, longest_wait_s
from actors.loadgen.spec import LoadSpec, Prompt
from engines.planning import ConversationWork
from grid.plan.cells import Cell
from grid.plan.conversations import conversation_specs, conversation_work
from grid.plan.specs import PLANNED_URL, load_specs
from grid.plan.workloads import CellAlignment, WorkloadPlan, cell_columns, request_columns

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
    request_timeout_s = float(cell.config["load"]["request_timeout_s"])
    convs = workloads.conversations.get(cell.workload_name)
    if convs is not None:
        specs = conversation_specs(cell, convs.conversations, PLANNED_URL)
        work = conversation_work(specs)
        return PlannedCell(cell, specs, "rounds", work.rounds,
                        Bounds(request_timeout_s, longest_wait_s(specs), cap_s), source,
                        conversation=work)
    prompts = workloads.prompts[cell.workload_name]
    loads = load_specs(cell, prompts)
    alignment = workloads.alignments.get(cell.cell_id)
    return PlannedCell(cell, loads, "requests", cell.num_requests,
                    Bounds(request_timeout_s, loads[0].longest_wait_s(), cap_s), source,
                    cell_columns(alignment),
                    _request_columns(prompts, workloads.sources(cell.workload_name), alignment))


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
