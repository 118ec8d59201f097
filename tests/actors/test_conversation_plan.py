"""Pure scheduling of conversation load: spec validation, arrival offsets (rate and trace
times with time_scale), seeded think times, rows of rounds never sent."""

from __future__ import annotations

import pytest

from actors.loadgen.conversation_plan import (
    ROW_KEYS,
    ConversationLoadSpec,
    arrival_offsets,
    think_times,
    unrun_rows,
)
from workloads.conversations import Conversation, Turn


def conv(cid: str, n: int = 3, arrival: float | None = None,
         think: float | None = None) -> Conversation:
    turns = tuple(Turn(messages=({"role": "user", "content": f"{cid}{k}"},),
                       arrival_s=arrival if k == 0 else None,
                       think_time_s=think if k else None) for k in range(n))
    return Conversation(cid, turns)


def spec(**kw: object) -> ConversationLoadSpec:
    kw.setdefault("conversations", (conv("a"), conv("b")))
    return ConversationLoadSpec(url="http://127.0.0.1:1", **kw)  # type: ignore[arg-type]


def test_validation_lists_every_problem() -> None:
    with pytest.raises(ValueError) as exc:
        spec(endpoint="grpc", arrival="trace", think_time="random", replay="x",
             concurrency=0, max_turns=0)
    msg = str(exc.value)
    for part in ("endpoint must be", "arrival=trace, but 2 conversations have no arrival time",
                 "think_time must be", "replay must be", "concurrency must be >= 1",
                 "max_turns must be >= 1"):
        assert part in msg
    with pytest.raises(ValueError, match="closed loop needs a concurrency"):
        spec(concurrency=None)


def test_trace_arrivals_sorted_and_scaled() -> None:
    convs = (conv("late", arrival=12.0), conv("first", arrival=10.0), conv("mid", arrival=10.5))
    s = spec(conversations=convs, arrival="trace", time_scale=0.5, concurrency=None)
    assert not s.closed_loop
    order = s.selected()
    assert [c.conversation_id for c in order] == ["first", "mid", "late"]
    assert arrival_offsets(s, order) == [0.0, 0.25, 1.0]


def test_rate_arrivals_follow_the_schedule_module() -> None:
    s = spec(rate=4.0, arrival="constant", concurrency=None)
    assert arrival_offsets(s, s.selected()) == [0.0, 0.25]
    p1 = spec(rate=2.0, arrival="poisson", seed=3)
    p2 = spec(rate=2.0, arrival="poisson", seed=3)
    assert arrival_offsets(p1, p1.selected()) == arrival_offsets(p2, p2.selected())


def test_think_times() -> None:
    c = conv("a", n=4, think=1.5)
    assert think_times(spec(think_time="trace"), c, 0) == [0.0, 1.5, 1.5, 1.5]
    assert think_times(spec(think_time="none"), c, 0) == [0.0] * 4
    assert think_times(spec(think_time="constant", think_time_s=0.2), c, 0) == [0.0, 0.2, 0.2,
                                                                                 0.2]
    e = spec(think_time="exponential", think_time_s=2.0, seed=1)
    a, b, other = think_times(e, c, 0), think_times(e, c, 0), think_times(e, c, 1)
    assert a == b and a != other and a[0] == 0.0 and all(x > 0 for x in a[1:])
    assert think_times(spec(max_turns=2), c, 0) == [0.0, 1.5]


def test_unrun_rows() -> None:
    rows = unrun_rows(conv("a", n=5), 3, 5, "skipped", "round 2 failed")
    assert [tuple(r) for r in rows] == [ROW_KEYS, ROW_KEYS]
    assert [(r["turn_index"], r["status"], r["error"], r["ttft_s"]) for r in rows] == [
        (3, "skipped", "round 2 failed", None), (4, "skipped", "round 2 failed", None)]


def test_the_longest_wait_is_a_think_time_or_an_arrival_gap_of_all_clients() -> None:
    from actors.loadgen.conversation_plan import longest_wait_s

    # closed loop, a constant 0.75 s think time before every round after the first
    assert longest_wait_s([spec(think_time="constant", think_time_s=0.75)]) == 0.75
    assert longest_wait_s([spec(think_time="none")]) == 0.0
    # the trace's think times: the longest of them
    traced = (conv("a", think=0.2), conv("b", think=1.5))
    assert longest_wait_s([spec(conversations=traced)]) == 1.5
    # two clients starting conversations at 1/s each from t=0 (constant): together a start
    # every second at 0, 0, 1, 1, ...: the widest gap 1 s; their think times are shorter
    clients = [spec(conversations=tuple(conv(f"c{i}{j}") for j in range(3)), rate=1.0,
                    arrival="constant", concurrency=None, think_time="constant",
                    think_time_s=0.25, seed=i) for i in range(2)]
    assert longest_wait_s(clients) == 1.0
