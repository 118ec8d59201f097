"""The modelled clock (actors/loadgen/timeline.py ``Clock``): a simulator at time_scale s spends
s wall seconds per modelled second, so the client reports wall intervals / s and waits
modelled intervals x s. Hand-worked numbers; then the load generator over a paced mock server."""

from __future__ import annotations

import asyncio

import pytest

from actors.loadgen.runner import run_load
from actors.loadgen.timeline import Clock, Timeline
from tests.actors.test_runner import Recorder, mk


def test_a_timeline_on_a_clock_at_half_the_walls_time_doubles_its_intervals() -> None:
    tl = Timeline(10.0)
    tl.slot, tl.sent, tl.end = 10.5, 11.0, 12.0
    tl.add_chunk(11.25, 1)
    tl.add_chunk(11.5, 2)
    tl.server_queue_s, tl.server_ttft_s = 0.1, 0.2
    tl.output_tokens = 3
    out = Clock(10.0, 0.5).modelled(tl)
    # origin 10 s kept; every offset from it / 0.5
    assert (out.scheduled, out.slot, out.sent, out.end) == (10.0, 11.0, 12.0, 14.0)
    assert out.chunk_times == [12.5, 13.0]
    assert (out.server_queue_s, out.server_ttft_s) == (0.2, 0.4)
    assert out.output_tokens == 3 and out.chunk_tokens == [1, 2]
    assert tl.end == 12.0 and tl.chunk_times == [11.25, 11.5]  # the wall's timeline unchanged
    assert Clock(10.0, 0.5).wall(3.0) == 1.5
    assert Clock(10.0).modelled(tl) is tl


def test_a_clock_needs_a_positive_scale() -> None:
    with pytest.raises(ValueError, match="clock scale must be > 0"):
        Clock(0.0, 0.0)
    with pytest.raises(ValueError, match="clock_scale must be > 0"):
        mk(clock_scale=-1.0)


def test_the_load_generator_reports_on_the_modelled_clock() -> None:
    # a mock server pacing 3 chunks 20 ms apart: at least 60 ms of wall per request, so at
    # clock_scale 0.5 at least 120 ms modelled. Open loop at a constant 2 requests per
    # modelled second: the schedule's arrivals 0.5 s apart on the modelled clock, 0.25 s wall
    rec = Recorder(gap_s=0.02)
    res = asyncio.run(run_load(mk(rate=2.0, arrival="constant", num_requests=4,
                                  clock_scale=0.5), transport=rec.transport()))
    assert all(r["status"] == "ok" and r["e2e_s"] >= 0.12 for r in res.rows)
    scheduled = [r["scheduled_at"] for r in res.rows]
    assert [b - a for a, b in zip(scheduled, scheduled[1:], strict=False)] == pytest.approx(
        [0.5, 0.5, 0.5], abs=1e-6)
    sent = rec.times
    # 0.75 s of wall between the first and the fourth send (1.5 s unscaled)
    assert 0.7 < sent[-1] - sent[0] < 1.2
    assert res.stats["window_end"] - res.stats["window_start"] >= 1.5 + 0.12
