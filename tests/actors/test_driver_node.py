"""ExternalProbe (actors/driver_node.py): an external server's probes in an actor on the driver's
node, against a real HTTP server on 127.0.0.1 (one that answers /health 503, then one that is
gone). Real Ray."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import ray

from actors.driver_node import ExternalProbe, on_this_node
from actors.probe import ServerAccess

pytestmark = pytest.mark.usefixtures("ray_session")


class _Unhealthy(BaseHTTPRequestHandler):
    """/health answers 503; every other path 200 with `{}` (noted in `asked`)."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).asked.append(self.path)
        code = 503 if self.path == "/health" else 200
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _serving() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unhealthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _probe(url: str) -> object:
    return ExternalProbe.options(
        scheduling_strategy=on_this_node()).remote(url, ServerAccess())


def test_an_unhealthy_then_gone_server_is_reported_with_one_line_each():
    with _serving() as url:
        prober = _probe(url)
        assert ray.get(prober.health.remote(), timeout=60) == \
            "is not healthy (/health answered 503)"
        end = ray.get(prober.end_cell.remote("/server_info", 5.0), timeout=60)
        assert end == {"samples": [], "info": {},
                       "death": f"external server {url} is not healthy (/health answered 503)"}
        assert "/server_info" not in _Unhealthy.asked  # a server that is down is not asked
    # the server is gone now: nothing listens on its port
    end = ray.get(prober.end_cell.remote("/server_info", 5.0), timeout=60)
    assert end["death"].startswith(f"external server {url} does not answer: ConnectError(")
    ray.kill(prober)
