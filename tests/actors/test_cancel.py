"""LoadGenActor.cancel: a cell's load against a server that accepts requests and never answers
ends at once, whichever call runs it (the warm-up in `prepare`, the window in `run`, closed or
open loop): its requests in flight are counted, their connections closed, the call ends with
LoadCancelled, and the actor stays (it answers and runs the next cell). Real Ray actor, real
sockets."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from actors.loadgen.spec import LoadSpec, Prompt

pytestmark = pytest.mark.usefixtures("ray_session")

PROMPTS = (Prompt("p", "hello", "d"),)
NEVER_S = 600.0
"""A request timeout no test waits out: only a cancel ends these loads."""


class Silent:
    """A TCP server that accepts every connection, reads what it is sent and never answers;
    `open` counts the connections its clients have not closed."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.open = 0
        self.requests = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._lock:
            self.open += 1
        try:
            while data := conn.recv(65536):
                with self._lock:
                    self.requests += data.count(b"POST ")
        except OSError:
            pass
        finally:
            conn.close()
            with self._lock:
                self.open -= 1


@contextmanager
def silent() -> Iterator[Silent]:
    server = Silent()
    try:
        yield server
    finally:
        server.sock.close()


def _until(what: Any, timeout_s: float = 30.0) -> None:
    """Wait until `what()` holds (a condition, not a timing: 30 s is only a hang's limit)."""
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def _cancelled(ref: Any) -> None:
    """`ref` (a prepare or run) ended with LoadCancelled."""
    import ray

    from actors.loadgen.actor import LoadCancelled

    ready, _ = ray.wait([ref], timeout=30)
    assert ready, "the cancelled call did not end"
    with pytest.raises(ray.exceptions.RayTaskError) as failed:
        ray.get(ref)
    assert isinstance(failed.value.cause, LoadCancelled)


@pytest.mark.parametrize("kw", [dict(concurrency=3), dict(rate=50.0, concurrency=3)],
                         ids=["closed-loop", "open-loop"])
def test_cancel_ends_a_window_stuck_on_a_silent_server_and_the_actor_stays(kw):
    import ray

    from actors.loadgen.actor import LoadGenActor

    actor = LoadGenActor.remote()  # type: ignore[attr-defined]
    with silent() as server:
        spec = LoadSpec(url=server.url, prompts=PROMPTS, num_requests=100, warmup_requests=0,
                        request_timeout_s=NEVER_S, **kw)
        ray.get(actor.prepare.remote(spec))
        run = actor.run.remote(time.time())
        _until(lambda: server.requests == 3)  # 3 streams, each waiting for its answer
        assert ray.get(actor.cancel.remote(), timeout=30) == 3  # the 3 in flight
        _cancelled(run)
        _until(lambda: server.open == 0)  # every connection closed
        assert server.requests == 3  # nothing sent after the cancel
        assert ray.get(actor.progress.remote()) is None  # between cells
        assert ray.get(actor.cancel.remote(), timeout=30) == 0  # nothing left to cancel
    ray.kill(actor)


def test_cancel_ends_a_warm_up_stuck_on_a_silent_server():
    import ray

    from actors.loadgen.actor import LoadGenActor

    actor = LoadGenActor.remote()  # type: ignore[attr-defined]
    with silent() as server:
        spec = LoadSpec(url=server.url, prompts=PROMPTS, concurrency=2, num_requests=10,
                        warmup_requests=2, request_timeout_s=NEVER_S)
        prepare = actor.prepare.remote(spec)
        _until(lambda: server.requests == 2)  # both warm-up requests in flight
        assert ray.get(actor.cancel.remote(), timeout=30) == 2
        _cancelled(prepare)
        _until(lambda: server.open == 0)
        with pytest.raises(ray.exceptions.RayTaskError, match="run\\(\\) without prepare"):
            ray.get(actor.run.remote(None))  # the cancelled cell cannot run
    ray.kill(actor)
