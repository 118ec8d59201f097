"""The request of each round: the whole history, as OpenAI chat messages or one prompt string
(docs/agentic.md, "History and rendering"). Each round JSON-encodes only its delta and a
request joins the encoded pieces (JSON string escaping is per character, so the escaped pieces
joined equal the escaped whole); re-encoding a 64 KB history every round cost ~4x more client
CPU."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal

from workloads.conversations.model import Conversation, Message, message_text

Replay = Literal["recorded", "live"]
REPLAYS: tuple[str, ...] = ("recorded", "live")
Template = Literal["chatml", "llama3"]
TEMPLATES: tuple[str, ...] = ("chatml", "llama3")

TOOLS_HEADER = (
    "\n\n# Tools\n\nYou can call the functions described below. To call one, reply with a JSON "
    "object {\"name\": <function name>, \"arguments\": <arguments object>} inside "
    "<tool_call></tool_call> tags. Function signatures:\n<tools>\n"
)
TOOLS_FOOTER = "\n</tools>"


def system_text(conv: Conversation) -> str | None:
    """The system message content: the system prompt followed by the tool schemas."""
    if not conv.tools:
        return conv.system
    schemas = "\n".join(json.dumps(t, sort_keys=True) for t in conv.tools)
    return (conv.system or "") + TOOLS_HEADER + schemas + TOOLS_FOOTER


def _chatml(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def _llama3(role: str, text: str) -> str:
    role = "ipython" if role == "tool" else role  # Llama 3.1's role for tool output
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>"


_RENDER: dict[str, tuple[str, Callable[[str, str], str], str]] = {
    # (text before the first message, one message, generation prompt)
    "chatml": ("", _chatml, "<|im_start|>assistant\n"),
    "llama3": ("<|begin_of_text|>", _llama3,
               "<|start_header_id|>assistant<|end_header_id|>\n\n"),
}


def render_message(template: str, message: Message) -> str:
    """One message in ``template``'s layout (tool calls as JSON after the content)."""
    return _RENDER[template][1](str(message.get("role", "user")), message_text(message))


def _escaped(text: str) -> bytes:
    """The inside of ``text``'s JSON string literal."""
    return json.dumps(text)[1:-1].encode()


class History:
    """The growing context of one conversation (see the module docstring)."""

    def __init__(self, conv: Conversation, replay: str = "recorded",
                 template: str = "chatml") -> None:
        if replay not in REPLAYS:
            raise ValueError(f"replay must be one of {REPLAYS}, got {replay!r}")
        if template not in TEMPLATES:
            raise ValueError(f"template must be one of {TEMPLATES}, got {template!r}")
        self.conv = conv
        self.replay = replay
        self.template = template
        self.messages: list[Message] = []
        head, _, gen = _RENDER[template]
        self._parts: list[str] = [head]
        self._parts_json: list[bytes] = [_escaped(head)]
        self._gen_json = _escaped(gen)
        self._messages_json: list[bytes] = []
        self._next = 0  # the round whose request comes next
        self._open = False  # a round was requested and its reply is not in yet
        system = system_text(conv)
        if system is not None:
            self._add({"role": "system", "content": system})

    def _add(self, message: Message) -> None:
        self.messages.append(message)
        text = render_message(self.template, message)
        self._parts.append(text)
        self._parts_json.append(_escaped(text))
        self._messages_json.append(json.dumps(message).encode())

    def request(self, k: int) -> list[Message]:
        """Append round k's new messages; the chat messages to send (the live list: encode it
        before the next call)."""
        if k != self._next:
            raise ValueError(f"round {k} requested, but round {self._next} comes next")
        if self._open:
            raise ValueError(f"round {k} requested, but round {k - 1} has no reply yet")
        for m in self.conv.turns[k].messages:
            self._add(m)
        self._next = k + 1
        self._open = True
        return self.messages

    def prompt(self) -> str:
        """The rendered prompt of the current request (for ``/generate``)."""
        return "".join(self._parts) + _RENDER[self.template][2]

    def prompt_json(self) -> bytes:
        """``json.dumps(self.prompt())`` as bytes, from the pieces encoded once."""
        return b'"' + b"".join(self._parts_json) + self._gen_json + b'"'

    def messages_json(self) -> bytes:
        """``json.dumps(self.messages)`` as bytes, from the messages encoded once."""
        return b"[" + b", ".join(self._messages_json) + b"]"

    def reply(self, k: int, live_text: str | None) -> str:
        """End round k: append the recorded reply (``recorded`` and the trace has one) or the
        live one; returns which was used (``recorded`` / ``live``)."""
        if k != self._next - 1 or not self._open:
            raise ValueError(f"reply to round {k}, but it is not the open round")
        self._open = False
        recorded = self.conv.turns[k].reply
        if self.replay == "recorded" and recorded is not None:
            self._add(recorded)
            return "recorded"
        self._add({"role": "assistant", "content": live_text or ""})
        return "live"

