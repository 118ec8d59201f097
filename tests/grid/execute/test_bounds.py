"""A running cell is bounded by its progress (grid/execute/stall.py), not by a model of how long
it should take: the stall bound and the run.cell_timeout_s cap on a fake clock, the polls
through real Ray actors, the controller's wait driven by hand, then whole runs against servers
that stall, that stream slowly, and that stream slowly for longer than the cap."""

from __future__ import annotations

import asyncio
import time

import pytest
import ray

import engines
import grid.execute.stall
from grid.execute.stall import (
    PING_TIMEOUT_S,
    PROGRESS_INTERVAL_S,
    STALL_MARGIN_S,
    LoadTimeout,
    Stall,
    StallWatch,
    stall_bound_s,
)
from grid.execute.steps import WaitTimeout
from grid.loader import load_cells, load_requests
from grid.plan.estimate import CELL_OVERHEAD_S, cell_work
from grid.run import EXIT_FAILED_CELLS, make_plan
from tests.grid.execute.paced_servers import paced_server, silent_server
from tests.grid.execute.smoke_runs import (
    SMOKE_BASELINE,
    STATED,
    assert_no_orphans,
    ledger_rows,
    run_smoke,
)

LATE_S = 2 * PROGRESS_INTERVAL_S + 3.0
"""How late past its bound a cell may fail: a poll interval to notice it, the controller's wait
(ray.wait's 1 s) and a busy 2-core machine's delay in the driver's loop (as in
test_parallel_hang.py); a bound not enforced would be late by the rest of the load (15 s or
more in each test here)."""


def test_the_stall_bound_is_a_requests_timeout_plus_the_schedules_longest_wait_plus_a_margin():
    assert STALL_MARGIN_S == 30.0
    assert stall_bound_s(300.0, 0.0) == 300.0 + 0.0 + 30.0  # closed loop, default timeout
    assert stall_bound_s(2.0, 7.5) == 2.0 + 7.5 + 30.0  # open loop: its widest arrival gap


def test_a_load_that_keeps_making_progress_outlasts_its_stall_bound():
    # The cell spent 12.5 s before its load was watched (a server's start, say).
    stall = Stall(request_timeout_s=2.0, longest_wait_s=0.0, cap_s=None, started=0.0,
                  before_s=12.5)
    assert stall.stall_s == 32.0
    for t in range(10, 1001, 10):  # a chunk every 10 s for 1000 s: 31 stall bounds long
        stall.check(float(t))
        stall.seen(0, t, float(t))
    stall.check(1000.0 + 31.9)  # the last progress at 1000 s: still within 32 s
    with pytest.raises(LoadTimeout) as failed:
        stall.check(1000.0 + 32.0)
    # the bound, and when in the cell it was counted from: 12.5 + 1000 s
    assert str(failed.value) == (
        "the load made no progress for 32 s (no token streamed, no request completed) from "
        "1012.5 s into the cell: bound = load.request_timeout_s 2 s + longest scheduled wait "
        "0 s + stall margin 30 s")
    # the cell's time adds up from the parts its line states: recorded 1051.0 s in, it
    # failed at 1012.5 + 32 = 1044.5 s and took 6.5 s more
    assert failed.value.at_s == 1044.5
    assert failed.value.recorded(1051.0) == (
        "; failed 1044.5 s into the cell, recorded 6.5 s later (the load cancelled, the "
        "server's end of the cell)")


def test_activity_that_does_not_grow_is_no_progress():
    stall = Stall(request_timeout_s=5.0, longest_wait_s=5.0, cap_s=None, started=0.0)
    stall.seen(0, 7, 1.0)  # client 0: 7 chunks and completions at t=1
    stall.seen(0, 7, 20.0)  # the same count again
    stall.seen(0, 6, 30.0)  # a read between a request's end and its completion: a dip
    stall.seen(1, 0, 35.0)  # client 1 has done nothing yet
    assert stall.last_progress == 1.0 and stall.deadline() == 1.0 + 40.0
    with pytest.raises(LoadTimeout, match="no progress for 40 s"):
        stall.check(41.0)
    stall.seen(1, 1, 41.0)  # another client's first chunk is progress
    assert stall.last_progress == 41.0


def test_the_cap_fails_a_load_that_keeps_making_progress():
    stall = Stall(request_timeout_s=300.0, longest_wait_s=0.0, cap_s=5.0, started=100.0)
    for n in range(1, 10):
        stall.seen(0, n, 100.0 + n * 0.5)
        stall.check(100.0 + n * 0.5)  # progress every 0.5 s, 4.5 s in: within the cap
    assert stall.deadline() == 105.0  # the cap, nearer than the stall bound
    with pytest.raises(LoadTimeout) as failed:
        stall.check(105.0)
    assert str(failed.value) == ("the load ran past run.cell_timeout_s=5 s, counted from 0.0 s "
                                 "into the cell")
    assert failed.value.at_s == 5.0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@ray.remote
class _Client:
    """A load generator's progress() that counts up, or never answers."""

    def __init__(self, answers: bool) -> None:
        self.answers, self.activity = answers, 0

    async def progress(self) -> dict[str, int] | None:
        if not self.answers:
            await asyncio.sleep(3600)
        self.activity += 1
        return {"done": self.activity, "tokens": 4 * self.activity, "errors": 0,
                "activity": self.activity}


def _until_dead(actor: object) -> None:
    """Call the killed `actor` until a call fails (at most 30 s)."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        try:
            ray.get(actor.progress.remote(), timeout=30)  # type: ignore[attr-defined]
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed client still answered after 30 s")


def _answered(watch: StallWatch) -> dict[str, int]:
    """Poll until a client's answer is read (the fake clock stands still meanwhile)."""
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        counts = watch.poll()
        if counts is not None:
            return counts
        time.sleep(0.05)
    raise AssertionError("no client answered a poll within 30 s")


@pytest.mark.usefixtures("ray_session")
def test_a_client_that_does_not_answer_is_no_news_and_the_bound_still_runs_out():
    clock = _Clock()
    answering, silent = _Client.remote(True), _Client.remote(False)
    stall = Stall(request_timeout_s=1.0, longest_wait_s=0.0, cap_s=None, started=0.0)
    watch = StallWatch([answering, silent], stall, clock)
    # one poll in flight per client: the first answer read is the answering client's first
    assert _answered(watch) == {"done": 1, "tokens": 4, "errors": 0}
    assert stall.best == {0: 1} and stall.last_progress == 0.0
    clock.now = PING_TIMEOUT_S + 1.0  # the silent client's poll of t=0 is now too old
    # (so may the answering client's second poll be, if its answer was not in yet: dropped
    # and asked again, so its second or third answer)
    assert _answered(watch)["done"] in (2, 3)
    assert stall.best[0] in (2, 3) and stall.last_progress == 11.0
    watch.check()  # no news from one client for 11 s, progress from the other: no stall
    ray.kill(answering)  # now no client answers
    # A poll the answering client was asked before it died may still come back: wait until the
    # client is gone (its calls run in order, so every earlier one is then answered or failed)
    # and read it while the clock still says 11 s, so that no answer arrives later. ray.kill
    # is asynchronous: a call sent right after it may still be answered, one sent once the
    # kill took effect fails.
    _until_dead(answering)
    watch.poll()
    assert stall.last_progress == 11.0
    clock.now = 11.0 + stall.stall_s - 0.1
    watch.poll()
    watch.check()
    clock.now = 11.0 + stall.stall_s
    watch.poll()
    with pytest.raises(LoadTimeout, match="no progress for 31 s"):
        watch.check()
    ray.kill(silent)


def test_the_watch_waits_polls_hands_counts_to_a_display_and_fails_at_the_bound():
    shown: list[dict[str, int]] = []
    checks = iter([None, LoadTimeout("the load made no progress for 3 s ...")])

    def check() -> None:
        error = next(checks)
        if error is not None:
            raise error

    watch = StallWatch([], Stall(1.0, 0.0, None, started=0.0), clock=lambda: 0.75)
    watch.check = check  # type: ignore[method-assign]
    watch.poll = lambda: {"done": 3, "tokens": 48, "errors": 1}  # type: ignore[method-assign]
    steps = watch.wait(["never-ready"], shown.append)
    wait = next(steps)
    assert wait.refs == ["never-ready"] and wait.timeout_s == PROGRESS_INTERVAL_S  # next poll
    wait = steps.throw(WaitTimeout())  # polled, still within the bound: wait again
    assert shown == [{"done": 3, "tokens": 48, "errors": 1}]
    with pytest.raises(LoadTimeout, match="no progress for 3 s"):
        steps.throw(WaitTimeout())
    # a warm-up's wait polls too, but shows nothing
    shown.clear()
    checks = iter([None])
    steps = watch.wait(["ready"])
    next(steps)
    steps.throw(WaitTimeout())
    assert shown == []
    # the refs ready: the wait ends
    with pytest.raises(StopIteration):
        steps.send(None)


def _recorded_failures(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Stall, float]]:
    """Each LoadTimeout a cell's Stall raises, with when it raised (monotonic)."""
    failures: list[tuple[Stall, float]] = []
    real = Stall.check

    def check(self: Stall, now: float) -> None:
        try:
            real(self, now)
        except LoadTimeout:
            failures.append((self, now))
            raise

    monkeypatch.setattr(Stall, "check", check)
    return failures


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_server_that_accepts_requests_and_answers_nothing_fails_its_cell_within_the_bound(
        tmp_path, monkeypatch):
    # Every request waits for an answer that never comes and times out after 1 s, so the 30
    # alone would take 30 s; with the margin at 5 s (30 s in a run: see STALL_MARGIN_S) the
    # stall bound is 1 + 0 + 5 = 6 s.
    monkeypatch.setattr(grid.execute.stall, "STALL_MARGIN_S", 5.0)
    failures = _recorded_failures(monkeypatch)
    with silent_server() as url:
        outcome, out = run_smoke(tmp_path, "engine=external", f"engine.options.url={url}",
                                 "grid.axes.concurrency=[1]", "load.warmup_requests=0",
                                 "load.num_requests=30", "load.request_timeout_s=1")
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    (error,) = [e for (e,) in ledger_rows(outcome.run_dir, "SELECT error FROM cells")]
    stated = STATED.fullmatch(error)
    assert stated is not None, error
    assert stated["bound"] == "6" and stated["timeout"] == "1" and stated["margin"] == "5"
    ((stall, failed_at),) = failures
    assert stall.best == {}  # not one chunk
    stalled = failed_at - stall.last_progress  # since the measured window opened
    # not before the bound, and at most LATE_S after it
    assert 6.0 <= stalled <= 6.0 + LATE_S
    # the load generator cancelled the stuck load (nothing of it can linger) and stays
    assert "replaced" not in out


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_launched_server_that_hangs_mid_cell_fails_it_within_the_bound_it_states(
        tmp_path, monkeypatch):
    # The simulator answers its first 8 requests (the 2 warm-up, 6 measured), then accepts
    # every request and sends no byte (health checks included: the cell's end waits out its
    # probe): the 9th hangs in flight. Each request times out after 1 s, so the 24 measured
    # ones left alone would take 24 s; with the margin at 8 s the stall bound is 1 + 0 + 8 =
    # 9 s. The line states when in the cell the bound was counted from (the server's start,
    # the warm-up and the 6 requests before it), when it failed and how long the rest took:
    # the cell is recorded within the bound + 10 s of its last progress, and its time is
    # the sum of the parts stated.
    monkeypatch.setattr(grid.execute.stall, "STALL_MARGIN_S", 8.0)
    failures = _recorded_failures(monkeypatch)
    outcome, out = run_smoke(tmp_path, "grid.axes.concurrency=[1]", "load.num_requests=30",
                             "load.request_timeout_s=1", "engine.options.hang_after_requests=8")
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    (cell,) = load_cells(outcome.run_dir).itertuples()
    stated = STATED.fullmatch(cell.error)
    assert stated is not None, cell.error
    assert stated["bound"] == "9" and stated["timeout"] == "1" and stated["margin"] == "8"
    ((stall, failed_at),) = failures
    assert stall.best[0] > 16 + 1  # past the first warm-up request: it hung mid-cell
    assert 9.0 <= failed_at - stall.last_progress <= 9.0 + LATE_S
    took = cell.finished_at - cell.started_at
    since, failed, later = (float(stated[k]) for k in ("since", "failed", "later"))
    assert took <= since + 9.0 + 10.0, cell.error
    assert failed + later == pytest.approx(took, abs=0.1)
    # the message prints each time to 0.1 s: their difference is exact to +-0.1 s (22.4 - 13.4
    # is 8.999... in floating point)
    assert 9.0 - 0.1 <= failed - since <= 9.0 + LATE_S + 0.1
    print(f"hung cell: {took:.1f} s = {since:.1f} s into the cell + no progress for "
          f"{failed - since:.1f} s (bound 9 s) + {later:.1f} s to record it")
    assert "replaced" not in out  # the load generator cancelled the stuck load
    assert_no_orphans(outcome.run_dir)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_run_cell_timeout_fails_a_cell_that_keeps_making_progress(tmp_path, monkeypatch):
    # A token every 100 ms, 16 a request: 30 requests take ~48 s; the cap stops the cell at
    # 15 s (the driver's own start of the cell's metrics and telemetry included: seconds on a
    # busy machine) while it streams.
    failures = _recorded_failures(monkeypatch)
    with paced_server(ttft_ms=100, chunk_ms=100) as url:
        outcome, out = run_smoke(tmp_path, "engine=external", f"engine.options.url={url}",
                                 "grid.axes.concurrency=[1]", "load.warmup_requests=0",
                                 "load.num_requests=30", "run.cell_timeout_s=15")
    assert outcome.exit_code == EXIT_FAILED_CELLS, out
    (error,) = [e for (e,) in ledger_rows(outcome.run_dir, "SELECT error FROM cells")]
    assert error.startswith("LoadTimeout: the load ran past run.cell_timeout_s=15 s, counted "
                            "from "), error
    ((stall, failed_at),) = failures
    assert stall.best[0] > 0  # it was streaming when the cap stopped it
    assert 15.0 <= failed_at - stall.started <= 15.0 + LATE_S


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_slow_streaming_server_outlasts_the_old_estimate_based_bound_and_its_cell_completes(
        tmp_path):
    # 8 requests of 4 tokens, one at a time, each token its own chunk: the first after 0.5 s,
    # then one every 5.5 s, so a request takes 0.5 + 3 x 5.5 = 17 s and the load ~136 s,
    # within its 25 s request timeout; its stall bound is 25 + 0 + 30 = 55 s.
    overrides = ["engine=external", "grid.axes.concurrency=[1]", "load.warmup_requests=0",
                 "load.num_requests=8", "workload.max_new_tokens=4", "load.request_timeout_s=25"]
    with paced_server(ttft_ms=500, chunk_ms=5500) as url:
        outcome, out = run_smoke(tmp_path, *overrides, f"engine.options.url={url}")
        plan = make_plan([*SMOKE_BASELINE, *overrides, f"engine.options.url={url}",
                          f"results_dir={tmp_path}"]).plan
    assert outcome.exit_code == 0, out
    (cell,) = plan.cells
    # What bounded this cell before: 10 x the estimate the simulator's default profile gave
    # any engine (8 waves at batch 1 of a 200-token prefill, 115 ms, that gives the first
    # token, and 3 decode steps, 10.9 ms each: 8 x 0.148 = 1.18 s, + 1.5 s per cell) + the
    # request timeout + 60 s.
    model_estimate = engines.modeller("sim").estimate_cell_seconds(cell_work(cell))
    assert model_estimate is not None
    old_bound = 10 * (model_estimate + CELL_OVERHEAD_S) + 25.0 + 60.0
    assert old_bound == pytest.approx(10 * (8 * (0.1153 + 3 * 0.0109) + 1.5) + 85.0, abs=0.1)
    (window,) = load_cells(outcome.run_dir).duration_s
    assert window > old_bound  # ~136 s against ~112 s
    requests = load_requests(outcome.run_dir)
    assert len(requests) == 8 and (requests.status == "ok").all()
    # Measured now: the plan estimates the cell from its own window (a real engine's cells
    # are unknown until measured).
    assert plan.cell_estimate(cell) == (pytest.approx(window + CELL_OVERHEAD_S), "measured")
