"""The conversation model: a conversation is the unit of multi-turn load.

A :class:`Conversation` is an id, a system prompt (with the tool schemas the agent may call)
and ordered :class:`Turn` s. A turn holds only what is *new* in that round - the user message or
the tool observations that arrived since the previous assistant reply - plus, when the trace
recorded it, the assistant reply that ended the round. The request for turn k is the whole
history up to and including turn k's new messages (see :mod:`workloads.conversations.render`).

Messages are OpenAI chat messages (``{"role": ..., "content": ...}``, optionally
``tool_calls`` / ``tool_call_id`` / ``name``); they are kept as plain dicts so a trace's own
fields reach the server unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Message = Mapping[str, Any]
"""One OpenAI chat message."""

CHARS_PER_TOKEN = 4
"""Rough size rule used only for estimates in this package (no tokenizer is loaded): the
server's own ``prompt_tokens`` is what results record."""


@dataclass(frozen=True)
class Turn:
    """One round of a conversation."""

    messages: tuple[Message, ...]
    """The new non-assistant messages of this round (user text, tool observations)."""
    reply: Message | None = None
    """The assistant reply the trace recorded for this round (``replay=recorded`` puts it in
    the history of later rounds); None when the trace has none."""
    think_time_s: float | None = None
    """Seconds the user / tool took before this round's request (from the trace)."""
    output_tokens: int | None = None
    """Output length the trace asks for this round (``max_new_tokens``); None = workload
    default."""
    arrival_s: float | None = None
    """Arrival time of this round's request in the trace (s, trace clock), when recorded."""
    prompt_tokens: int | None = None
    """The context size the trace recorded for this round's request (informational)."""


@dataclass(frozen=True)
class Conversation:
    """A multi-turn conversation to replay."""

    conversation_id: str
    turns: tuple[Turn, ...]
    system: str | None = None
    """The system prompt (without the tool schemas, which are rendered after it)."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """OpenAI-style tool schemas (``{"type": "function", "function": {...}}``)."""
    domain: str = "agentic"
    """Domain label (agentic, coding, ...), carried into every row."""
    source: str | None = None
    """Where the conversation came from (file name and format, or a source label)."""
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Anything else the trace said about it (kept for provenance, never sent)."""

    @property
    def arrival_s(self) -> float | None:
        """Trace arrival time of the first round, when recorded."""
        return self.turns[0].arrival_s if self.turns else None


def message_text(message: Message) -> str:
    """The text a message contributes to a context: its content (a string or OpenAI text
    parts) followed by its tool calls as JSON."""
    import json

    content = message.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    else:
        text = str(content)
    calls = message.get("tool_calls")
    if calls:
        text += "".join("\n" + json.dumps(c.get("function", c), sort_keys=True)
                        for c in calls if isinstance(c, Mapping))
    return text


def estimate_tokens(chars: int) -> int:
    """Token estimate for ``chars`` characters of text (see :data:`CHARS_PER_TOKEN`)."""
    return -(-chars // CHARS_PER_TOKEN)
