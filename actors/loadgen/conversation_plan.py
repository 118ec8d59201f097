"""What a conversation load is (``ConversationLoadSpec``), when each conversation and each of
its rounds is due, and the per-round row - pure: no clocks, no sockets. The load shapes (a
conversation as the unit of load, closed or open loop, the trace's own arrivals) and the think
times between rounds: docs/agentic.md.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from actors.loadgen import schedule
from actors.loadgen.spec import ClientSpec, choice_errors
from workloads.conversations.model import Conversation
from workloads.conversations.render import REPLAYS, TEMPLATES

ConversationArrival = Literal["poisson", "gamma", "constant", "trace"]
ThinkTime = Literal["trace", "none", "constant", "exponential"]
ARRIVALS: tuple[str, ...] = get_args(ConversationArrival)
THINK_TIMES: tuple[str, ...] = get_args(ThinkTime)


@dataclass(frozen=True, kw_only=True)
class ConversationLoadSpec(ClientSpec):
    """The conversation load one client drives against one server (with a conversation as
    the unit of load: ``rate`` is conversations/s, ``duration_s`` stops starting rounds and
    records the later ones as not run, ``max_new_tokens`` is the length of a round whose trace
    gives none, ``seed`` seeds arrivals and think times)."""

    conversations: tuple[Conversation, ...]
    """The conversations to replay, in order (closed loop and rate-driven open loop take them
    in this order; ``arrival="trace"`` orders them by arrival time)."""
    concurrency: int | None = 1
    """Closed loop: conversations in flight. Open loop: cap on conversations in flight
    (None = uncapped)."""
    arrival: str = "poisson"
    """Arrival law of an open loop, or ``trace`` for the trace's own arrival times."""
    time_scale: float = 1.0
    """Multiplier of trace arrival offsets (0.5 = replay twice as fast)."""
    think_time: str = "trace"
    """Think time between rounds: ``trace`` | ``none`` | ``constant`` | ``exponential``."""
    think_time_s: float = 0.0
    """Constant think time, or the mean of the exponential one (s)."""
    replay: str = "recorded"
    """History of later rounds: the trace's replies (``recorded``, comparable across variants)
    or the server's own (``live``)."""
    template: str = "chatml"
    """Chat template layout of the rendered ``/generate`` prompt (``chatml`` | ``llama3``)."""
    max_turns: int | None = None
    """Replay at most this many rounds of each conversation."""
    num_conversations: int | None = None
    """How many of ``conversations`` to run (None = all)."""

    def __post_init__(self) -> None:
        errors = self.client_errors()
        if not self.conversations:
            errors.append("conversations must not be empty")
        errors += choice_errors(arrival=(self.arrival, ARRIVALS),
                                think_time=(self.think_time, THINK_TIMES),
                                replay=(self.replay, REPLAYS), template=(self.template, TEMPLATES))
        if self.concurrency is not None and self.concurrency < 1:
            errors.append(f"concurrency must be >= 1, got {self.concurrency}")
        if self.closed_loop and self.concurrency is None:
            errors.append("a closed loop needs a concurrency (conversations in flight)")
        if self.arrival == "trace":
            missing = [c.conversation_id for c in self.conversations if c.arrival_s is None]
            if missing:
                errors.append(f"arrival=trace, but {len(missing)} conversations have no "
                              f"arrival time (first: {missing[0]})")
        if not self.time_scale > 0 or self.think_time_s < 0:
            errors.append("time_scale must be > 0, think_time_s >= 0")
        for name in ("max_turns", "num_conversations"):
            v = getattr(self, name)
            if v is not None and v < 1:
                errors.append(f"{name} must be >= 1, got {v}")
        if errors:
            raise ValueError("invalid ConversationLoadSpec: " + "; ".join(errors))

    @property
    def closed_loop(self) -> bool:
        return self.rate is None and self.arrival != "trace"

    def selected(self) -> list[Conversation]:
        """The conversations this load runs, in start order."""
        convs = list(self.conversations[: self.num_conversations])
        if self.arrival == "trace":
            convs.sort(key=lambda c: c.arrival_s or 0.0)  # stable: file order breaks ties
        return convs

    def turns_of(self, conv: Conversation) -> int:
        n = len(conv.turns)
        return n if self.max_turns is None else min(n, self.max_turns)


def arrival_offsets(spec: ConversationLoadSpec, convs: Sequence[Conversation]) -> list[float]:
    """Open loop: start offset (s from the window start) of each conversation of ``convs``
    (already in start order)."""
    if spec.arrival == "trace":
        first = (convs[0].arrival_s or 0.0) if convs else 0.0
        return [((c.arrival_s or 0.0) - first) * spec.time_scale for c in convs]
    assert spec.rate is not None
    return list(itertools.islice(
        schedule.arrival_offsets(spec.rate, spec.arrival, spec.burstiness, spec.seed),
        len(convs)))


def think_times(spec: ConversationLoadSpec, conv: Conversation, index: int) -> list[float]:
    """Think time before each round of ``conv`` (round 0: always 0): seeded by the spec's seed
    and the conversation's position ``index``, so a replay repeats them exactly."""
    n = spec.turns_of(conv)
    if spec.think_time == "none":
        return [0.0] * n
    if spec.think_time == "trace":
        return [0.0] + [t.think_time_s or 0.0 for t in conv.turns[1:n]]
    if spec.think_time == "constant":
        return [0.0] + [spec.think_time_s] * (n - 1)
    rng = random.Random(f"specgrid-think-{spec.seed}-{index}")
    if spec.think_time_s == 0:
        return [0.0] * n
    return [0.0] + [rng.expovariate(1.0 / spec.think_time_s) for _ in range(n - 1)]


def longest_wait_s(specs: Sequence[ConversationLoadSpec]) -> float:
    """The longest a conversation cell's own schedule leaves all its clients (``specs``, one
    each) with nothing to send: the longest think time before a round, or the widest gap
    between consecutive conversation starts of an open loop (every client's together). Once a
    round ends, the cell's next one is due within that time."""
    think, starts = 0.0, []
    for spec in specs:
        selected = spec.selected()
        for index, conv in enumerate(selected):
            think = max([think, *think_times(spec, conv, index)])
        if not spec.closed_loop and selected:
            starts += arrival_offsets(spec, selected)
    return max(think, schedule.longest_gap(sorted(starts)))


ROW_KEYS: tuple[str, ...] = (
    "conversation_id", "turn_index", "num_turns", "domain", "status", "error",
    "context_tokens", "cached_tokens", "request_chars", "output_tokens", "reply_source",
    "think_time_s", "scheduled_at", "sent_at", "dispatch_lag_s", "ttft_s", "e2e_s", "tpot_s",
    "itl_s", "accept_length", "spec_verify_ct", "finish_reason",
)
"""Keys of every per-round row, in order. ``status``: ``ok`` | ``error`` (this round failed)
| ``skipped`` (an earlier round of the conversation failed) | ``not_run`` (the load window
ended first). ``context_tokens``: the server's ``prompt_tokens``; ``cached_tokens``: the
server's prefix-cache hit for this round; ``request_chars``: size of the context sent."""


def unrun_rows(conv: Conversation, start: int, n_turns: int, status: str,
               error: str) -> list[dict[str, Any]]:
    """Rows of rounds ``start..n_turns-1`` that were never sent."""
    rows = []
    for k in range(start, n_turns):
        row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
        row.update(conversation_id=conv.conversation_id, turn_index=k, num_turns=n_turns,
                   domain=conv.domain, status=status, error=error, itl_s=[])
        rows.append(row)
    return rows
