"""A small stand-in engine for ServerActor life-cycle tests: `python fake_engine.py MODE --port P`.

Modes: ok (serves /health), crash (logs and exits 3 at start), refuse (logs a traceback with
blank lines and trailing newlines, as a Python engine dying at start does, and exits 1), never
(never listens), bind-late (waits for --go FILE, then binds its port with asyncio's
create_server, as uvicorn does; should that fail, logs the OSError as uvicorn does and hangs, as
SGLang's server then waits for its scheduler), ignore-sigterm (serves /health, ignores SIGTERM),
grandchild (serves /health and starts a grandchild that writes its pid to --pid-file and
sleeps). `--config FILE` logs the file's path and content (it must exist when the engine
starts). `--api-key KEY` is logged in the clear, as SGLang logs its server_args
(python/sglang/srt/entrypoints/engine.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def _bind(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", port)
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid-file")
    parser.add_argument("--config")
    parser.add_argument("--api-key")
    parser.add_argument("--go")
    args = parser.parse_args()
    print(f"fake engine {args.mode} starting", flush=True)
    if args.api_key:
        print(f"server_args={{'api_key': {args.api_key!r}}}", flush=True)
    if args.config:
        with open(args.config) as f:
            print(f"config {args.config}: {f.read()}", flush=True)
    if args.mode == "crash":
        print("RuntimeError: CUDA out of memory (fake)", flush=True)
        sys.exit(3)
    if args.mode == "refuse":
        print("loading weights\n\nTraceback (most recent call last):\n  File \"engine.py\", "
              "line 1, in <module>\n    init_memory_pool()\n\nRuntimeError: Not enough memory "
              "(fake)\n\n\n", flush=True)
        sys.exit(1)
    if args.mode == "never":
        while True:
            time.sleep(1)
    if args.mode == "bind-late":
        while not os.path.exists(args.go):
            time.sleep(0.05)
        try:
            asyncio.run(_bind(args.port))
        except OSError as exc:
            print(f"ERROR:    {exc}", flush=True)  # uvicorn's logger.error(exc)
            while True:
                time.sleep(1)
    if args.mode == "ignore-sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.mode == "grandchild":
        child = subprocess.Popen([sys.executable, "-c",
                                  "import time\nwhile True: time.sleep(1)"])
        with open(args.pid_file, "w") as f:
            f.write(str(child.pid))
    print("fake engine loaded its weights in 0.25 s", flush=True)  # a start-up phase's line
    print("The server is fired up and ready to roll!", flush=True)
    HTTPServer(("127.0.0.1", args.port), Health).serve_forever()


if __name__ == "__main__":
    main()
