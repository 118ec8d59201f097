from __future__ import annotations

import io

import pytest

from grid.execute.progress import Eta, Progress


def test_plain_lines_without_a_terminal():
    out = io.StringIO()  # not a TTY
    with Progress(2, estimates=[10.0, 10.0], stream=out) as progress:
        assert not progress.live
        progress.server_phase("eagle3", "capturing CUDA graphs")
        progress.cell_started(0, "eagle3 c=1 coding", 8)
        progress.cell_requests(4, 400, 0)  # no line per request update
        progress.cell_finished(0, "eagle3 c=1 coding", "done", 20.0, "98.1 tok/s")
        progress.echo("a message")
    lines = out.getvalue().splitlines()
    assert lines == [
        "server eagle3: capturing CUDA graphs",
        "[1/2] eagle3 c=1 coding: started (8 requests)",
        "[1/2] eagle3 c=1 coding: done in 20.0 s — 98.1 tok/s; ETA 20s",
        "a message",
    ]
    assert "\x1b[" not in out.getvalue()  # no terminal control codes in logs


def test_live_display_on_a_terminal_prints_messages_above_it():
    out = io.StringIO()
    with Progress(1, stream=out, live=True) as progress:
        progress.cell_started(0, "baseline c=4 coding", 16)
        progress.cell_requests(8, 800, 1)
        progress.cell_finished(0, "baseline c=4 coding", "done", 3.0)
    assert "[1/1] baseline c=4 coding: done in 3.0 s; ETA 0s" in out.getvalue()


def test_eta_learns_from_finished_cells():
    eta = Eta([10.0, 10.0, 10.0, 10.0], 4)
    assert eta.remaining_s() == 40.0
    eta.finished(0, 20.0)  # took twice its estimate
    assert eta.remaining_s() == pytest.approx(60.0)
    eta.finished(1, 10.0)  # 30 s for 20 s planned
    assert eta.remaining_s(running_elapsed=5.0) == pytest.approx(20 * 1.5 - 5)


def test_eta_without_estimates_uses_mean_duration():
    eta = Eta(None, 3)
    assert eta.remaining_s() is None
    eta.finished(0, 6.0)
    assert eta.remaining_s() == 12.0


def test_a_conversation_cell_counts_rounds():
    out = io.StringIO()
    with Progress(1, stream=out) as progress:
        progress.cell_started(0, "eagle3 c=4 agentic_conversations", 45, unit="rounds")
        progress.cell_finished(0, "eagle3 c=4 agentic_conversations", "done", 3.0)
    assert "[1/1] eagle3 c=4 agentic_conversations: started (45 rounds)" in out.getvalue()
