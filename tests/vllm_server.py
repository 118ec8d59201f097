"""Starting a real vLLM server from a command line, for the real-engine tests."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from actors._process import log_tail, spawn


@contextmanager
def serving_vllm(argv: list[str], env: dict[str, str], log_path: Path) -> Iterator[str]:
    """A real vLLM server from ``argv`` (its `--host 127.0.0.1 --port N` among them), its output
    in ``log_path``: yields its URL once /health answers (at most 300 s); its process group is
    killed on the way out (and with the test process: `spawn`)."""
    port = argv[argv.index("--port") + 1]
    proc = spawn(argv, env, log_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log_tail(log_path)
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM did not answer /health in 300 s: {log_path}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the API server, its engine core and worker
        proc.wait(timeout=30)
