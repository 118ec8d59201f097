"""History and rendering of each round's request: whole history, growing exactly by the
previous reply and the new delta; recorded vs live replies; tool schemas in the system
message. Expected texts are written out literally here."""

from __future__ import annotations

import json

import pytest

from workloads.conversations import Conversation, History, Turn

TOOL = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}
CONV = Conversation(
    "c", system="S", tools=(TOOL,), turns=(
        Turn(messages=({"role": "user", "content": "U0"},),
             reply={"role": "assistant", "content": "R0"}),
        Turn(messages=({"role": "tool", "content": "T1"},)),  # no recorded reply
        Turn(messages=({"role": "tool", "content": "T2a"}, {"role": "user", "content": "U2b"}),
             reply={"role": "assistant", "content": "R2"}),
    ))
SYSTEM = ("S\n\n# Tools\n\nYou can call the functions described below. To call one, reply with "
          "a JSON object {\"name\": <function name>, \"arguments\": <arguments object>} inside "
          "<tool_call></tool_call> tags. Function signatures:\n<tools>\n"
          + json.dumps(TOOL, sort_keys=True) + "\n</tools>")


def test_chat_history_grows_by_reply_and_delta() -> None:
    h = History(CONV)  # replay=recorded
    sent = []
    for k in range(3):
        sent.append([dict(m) for m in h.request(k)])
        h.reply(k, f"live{k}")
    assert sent[0] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "U0"}]
    assert sent[1] == sent[0] + [{"role": "assistant", "content": "R0"},
                                 {"role": "tool", "content": "T1"}]
    # round 1 had no recorded reply: the live one stands in
    assert sent[2] == sent[1] + [{"role": "assistant", "content": "live1"},
                                 {"role": "tool", "content": "T2a"},
                                 {"role": "user", "content": "U2b"}]


def test_rendered_prompt_chatml_recorded_and_live() -> None:
    rec, live = History(CONV, "recorded"), History(CONV, "live")
    prompts: dict[str, list[str]] = {"recorded": [], "live": []}
    for k in range(3):
        for name, h in (("recorded", rec), ("live", live)):
            h.request(k)
            prompts[name].append(h.prompt())
            assert h.reply(k, f"L{k}") == ("recorded" if name == "recorded" and k != 1
                                           else "live")
    sys = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    gen = "<|im_start|>assistant\n"
    assert prompts["recorded"] == [
        sys + "<|im_start|>user\nU0<|im_end|>\n" + gen,
        sys + "<|im_start|>user\nU0<|im_end|>\n<|im_start|>assistant\nR0<|im_end|>\n"
              "<|im_start|>tool\nT1<|im_end|>\n" + gen,
        sys + "<|im_start|>user\nU0<|im_end|>\n<|im_start|>assistant\nR0<|im_end|>\n"
              "<|im_start|>tool\nT1<|im_end|>\n<|im_start|>assistant\nL1<|im_end|>\n"
              "<|im_start|>tool\nT2a<|im_end|>\n<|im_start|>user\nU2b<|im_end|>\n" + gen,
    ]
    assert prompts["live"][1] == (sys + "<|im_start|>user\nU0<|im_end|>\n<|im_start|>assistant\n"
                                  "L0<|im_end|>\n<|im_start|>tool\nT1<|im_end|>\n" + gen)


def test_llama3_layout_and_tool_calls_in_text() -> None:
    call = {"id": "1", "type": "function",
            "function": {"name": "grep", "arguments": "{\"pattern\": \"x\"}"}}
    conv = Conversation("d", turns=(
        Turn(messages=({"role": "user", "content": "find x"},),
             reply={"role": "assistant", "content": None, "tool_calls": [call]}),
        Turn(messages=({"role": "tool", "content": "a.py:3: x"},)),
    ))
    h = History(conv, template="llama3")
    h.request(0)
    h.reply(0, None)
    h.request(1)
    assert h.prompt() == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nfind x<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n\n"
        "{\"arguments\": \"{\\\"pattern\\\": \\\"x\\\"}\", \"name\": \"grep\"}<|eot_id|>"
        "<|start_header_id|>ipython<|end_header_id|>\n\na.py:3: x<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_rounds_must_come_in_order() -> None:
    h = History(CONV)
    with pytest.raises(ValueError, match="round 1 requested, but round 0 comes next"):
        h.request(1)
    h.request(0)
    with pytest.raises(ValueError, match="round 1 requested"):
        h.request(1)  # round 0 has no reply yet
    with pytest.raises(ValueError, match="replay must be one of"):
        History(CONV, replay="both")


@pytest.mark.parametrize("template", ["chatml", "llama3"])
def test_incremental_json_equals_encoding_the_whole(template: str) -> None:
    conv = Conversation("u", system="sys \"quoted\" \\ back\nslash", tools=(TOOL,), turns=(
        Turn(messages=({"role": "user", "content": "tab\there, unicode é ✓ 𝄞, nul \x00"},),
             reply={"role": "assistant", "content": None, "tool_calls": [
                 {"id": "1", "function": {"name": "grep", "arguments": "{\"p\": \"\\\\d\"}"}}]}),
        Turn(messages=({"role": "tool", "content": "line1\r\nline2 </s> \u2028"},)),
    ))
    h = History(conv, template=template)
    for k in range(2):
        h.request(k)
        assert h.prompt_json() == json.dumps(h.prompt()).encode()
        assert h.messages_json() == json.dumps(h.messages).encode()
        h.reply(k, "live ✓")
