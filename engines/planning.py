"""What the plan asks of an engine's model before anything runs, as plain values: where a cell
stands against the model's calibration (`Scenario` -> `EnvelopeFinding`) and how long its load
takes (`CellWork`, with a conversation cell's `ConversationWork`). An engine that models its
numbers answers them (engines/modelling.py, `engines.modeller(name)`); the driver builds them
from a cell's config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scenario:
    """What one cell asks of a server, as plain values: from its config when the plan checks
    it, from what it recorded when a report does. An engine that models its numbers judges it
    against what its model was calibrated on (`Modeller.envelope`)."""

    args: Mapping[str, Any]
    """The variant's args (SGLang ServerArgs field names)."""
    concurrency: float | None = None
    """Requests in flight: a closed-loop cell's concurrency, or an open-loop cell's mean
    running batch where it was measured (None = not known)."""
    rate: float | None = None
    """Open loop: arrivals per second, whose implied batch stands in for an unknown
    `concurrency`."""
    max_in_flight: int | None = None
    """Open loop: the cap on requests in flight."""
    output_tokens: int | None = None
    """The most output tokens of a request."""
    prompt_tokens: tuple[int, int] | None = None
    """The shortest and longest prompt, in tokens."""
    domains: Sequence[str] = ()
    """The prompts' domain labels."""
    disable_above_batch: int | None = None
    """The variant's speculative_disable_above_batch."""
    depth_schedule: bool = False
    """The variant sets the speculative depth by running batch (speculative_depth)."""
    adaptive: bool = False
    """The variant has the engine adapt the depth at run time (speculative_adaptive)."""
    conversations: bool = False
    """Multi-turn conversation replay (a growing context per conversation)."""
    tp_size: int = 1
    env: Mapping[str, Any] = field(default_factory=dict)
    """The variant's environment."""


@dataclass(frozen=True)
class EnvelopeFinding:
    """Where a Scenario stands against an engine's calibration."""

    outside: tuple[str, ...]
    """Why it lies outside, one phrase each; empty = inside."""
    covered: str
    """What the calibration covers, one line (or why there is none)."""


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


@dataclass(frozen=True)
class CellWork:
    """One cell's load as plain values, for an engine's estimate of how long it takes."""

    config: Mapping[str, Any]
    """The cell's resolved config (`engine`, `variant`, `workload`, `load` sections)."""
    tp_size: int
    num_requests: int
    """Measured requests of a prompt cell (warm-up not included: `load.warmup_requests`)."""
    concurrency: int | None
    """Requests in flight (closed loop), or the open loop's cap."""
    rate: float | None
    """Open loop: arrivals per second (None = closed loop)."""
    conversation: ConversationWork | None = None
    """A conversation cell's work (its rounds, not `num_requests`, are its requests)."""

