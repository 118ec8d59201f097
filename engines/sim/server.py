"""HTTP process of the simulated SGLang server (aiohttp.web), its life cycle and fault injection;
what it says about itself (/server_info, /model_info, /v1/models) is built in info.py.

Life cycle as SGLang's: the port listens first; until ``--sim-startup-seconds`` have passed,
/health, /health_generate, /ready and the request endpoints answer 503; then the log says
"The server is fired up and ready to roll!". SIGTERM drains (health 503, new requests 503,
running ones finish, at most 15 s; ``SGL_FORCE_SHUTDOWN=1`` skips the drain), SIGINT exits.

Faults (counted over generation requests, in arrival order, deterministic per ``--sim-seed``):
``--sim-crash-after-requests N``: request N+1 makes the process ``os._exit(1)`` at once (all
in-flight streams are cut). ``--sim-hang-after-requests N``: from request N+1 on the server stops:
no step runs, no stream gets another byte, and every new connection (health checks included)
gets no byte at all. ``--sim-error-rate P``: that fraction of requests get HTTP 500.
``--sim-malformed-rate P``: that fraction of streams get one broken SSE event mid-stream
(``data: {"text": "word`` and the blank line); the stream then continues normally.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from engines.redact import redact_argv
from engines.sim import info
from engines.sim.api import GenerationAPI, native_error
from engines.sim.cli import SIM_VERSION, SimArgError, SimConfig, resolve
from engines.sim.core import SimEngine
from engines.sim.metrics import SimCollector, Snapshot
from engines.sim.model import prompt_tokens
from engines.sim.wire import json_response

log = logging.getLogger("engines.sim")
READY_LINE = "The server is fired up and ready to roll!"
GATED = frozenset({"/health", "/health_generate", "/ready", "/generate", "/v1/chat/completions",
                   "/v1/completions"})
FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running "
            "or waiting requests, the operation will not be performed.)\n")
FLUSH_FAILED = "Flush cache failed.\n"
FLUSH_TIMEOUT = "Timed out waiting for idle state."
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _bearer_ok(header: str | None, key: str) -> bool:
    if not header:
        return False
    parts = header.split(" ", 1)
    return len(parts) == 2 and parts[0].lower() == "bearer" and secrets.compare_digest(
        parts[1], key)


IMPORTED_AT = time.time()
"""When this process began the simulator's own code (after the interpreter's start): SGLang's
scheduler_e2e and tokenizer_e2e count from its launch, the simulator's from here."""

STARTUP_PHASES = (
    ("load_weight", 0.6, "Load weight begin. (simulated)", "Load weight end. (simulated)"),
    ("kv_cache_allocation", 0.1, None, "KV Cache is allocated. (simulated)"),
    ("cuda_graph", 0.3, "Capture cuda graph begin. (simulated)", None),
)
"""(phase, share of --sim-startup-seconds, SGLang's log lines before and after it)."""


class SimServer:
    """State of one simulated server process."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.args = cfg.args
        self.engine = SimEngine(cfg)
        self.api = GenerationAPI(self)
        self.model_name: str = cfg.args["served_model_name"]
        self.ready = False
        self.draining = False
        self.hung = False
        self.accepted = 0
        self.started_at = time.time()
        self.startup_time = 0.0
        """Seconds from process start to ready (SGLang's startup_time)."""
        self.launch_command = " ".join(["python", "-m", "engines.sim", *redact_argv(sys.argv[1:])])
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SimCollector(self.engine.core.stats, self.model_name,
                                            self.engine.spec is not None, self._snapshot))
        self._stop = asyncio.Event()

    # ------------------------------------------------------------------ faults
    async def admit_api_request(self) -> tuple[bool, bool]:
        """Count one generation request; crash or hang if told to. Returns (answer 500,
        malformed stream)."""
        sim = self.args["sim"]
        self.accepted += 1
        crash, hang = sim["crash_after_requests"], sim["hang_after_requests"]
        if crash is not None and self.accepted > crash:
            log.error("simulated crash (--sim-crash-after-requests %d): exiting now", crash)
            logging.shutdown()
            os._exit(1)
        if hang is not None and self.accepted > hang:
            if not self.hung:
                log.error("simulated hang (--sim-hang-after-requests %d): no more bytes", hang)
                self.hung = True
                if self.engine.loop is not None:
                    self.engine.loop.hung = True
            await asyncio.get_running_loop().create_future()
        rng = self.engine.fault_rng
        err, bad = rng.random(), rng.random()  # always two draws: stable per arrival index
        return err < sim["error_rate"], bad < sim["malformed_rate"]

    # ------------------------------------------------------------------ middleware
    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.hung:
            await asyncio.get_running_loop().create_future()
        path = request.path
        key = self.args["api_key"]
        # --api-key as SGLang 0.5.23 enforces it (python/sglang/srt/utils/auth.py,
        # decide_request_auth): OPTIONS and paths starting /health, /ready or /metrics are
        # always open (probes, Prometheus); every other route, /flush_cache included (its
        # ADMIN_OPTIONAL level falls back to api_key without an admin key), needs
        # `Authorization: Bearer <key>`, else 401 {"error": "Unauthorized"}.
        if key and request.method != "OPTIONS" and not path.startswith(
                ("/health", "/ready", "/metrics")):
            if not _bearer_ok(request.headers.get("Authorization"), key):
                return json_response({"error": "Unauthorized"}, status=401)
        if path in GATED and (not self.ready or self.draining):
            state = "starting" if not self.ready else "draining"
            if path.startswith(("/health", "/ready")):
                return web.Response(status=503, text="")
            return native_error(503, f"The server is {state}; try again later.")
        return await handler(request)

    # ------------------------------------------------------------------ endpoints
    async def health_generate(self, request: web.Request) -> web.Response:
        """/health and /health_generate as SGLang 0.5.23 (python/sglang/srt/entrypoints/
        http_server.py ``health_generate``): unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is
        false (then /health answers at once), submit a 1-token generation, then every second
        check whether the server produced any output since the check began; 200 when it did,
        503 after SGLANG_HEALTH_CHECK_TIMEOUT (20) seconds. The timeout is scaled by
        --sim-time-scale like every other duration; the one-second poll is too, up to one
        second of wall time: a simulator slowed down (scale > 1) answers its health check as
        soon as a real server would on the wall's clock, never after the 5 s a readiness probe
        waits (at scale 8 every probe timed out and the server was never ready)."""
        env = self.cfg.env
        if (request.path == "/health" and env.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION",
                                                 "true").strip().lower() in ("0", "false")):
            return web.Response(status=200, text="")
        req = self.engine.new_request(prompt_text="health", prompt_tokens=1, max_new_tokens=1,
                                      ignore_eos=True, temperature=0.0,
                                      rid="HEALTH_CHECK_" + uuid.uuid4().hex, counted=False)
        loop = self.engine.loop
        tic = time.monotonic()
        self.engine.submit(req)
        timeout = float(env.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        poll = min(self.engine.time_scale, 1.0)
        try:
            while time.monotonic() < tic + timeout * max(self.engine.time_scale, 1e-3):
                await asyncio.sleep(poll)
                if loop is not None and loop.last_output_at > tic:
                    return web.Response(status=200, text="")
        finally:
            self.engine.abort(req)
        return web.Response(status=503, text="")

    async def ready_endpoint(self, request: web.Request) -> web.Response:
        return json_response({"status": "ready", "simulated": True})

    async def server_info_endpoint(self, request: web.Request) -> web.Response:
        status = ("ready" if self.ready and not self.draining else
                  ("draining" if self.draining else "starting"))
        return json_response(info.server_info(
            self.cfg, self.engine, launch_command=self.launch_command, status=status,
            startup_time=self.startup_time))

    async def model_info(self, request: web.Request) -> web.Response:
        return json_response(info.model_info(self.cfg))

    async def models(self, request: web.Request) -> web.Response:
        return json_response(info.models(self.cfg, self.started_at))

    async def flush_cache(self, request: web.Request) -> web.Response:
        """SGLang 0.5.23 (http_server.py ``flush_cache``, scheduler_components/
        flush_wrapper.py): flushes when idle; busy with ``?timeout=0`` (default) answers 400
        "Flush cache failed."; with ``?timeout=S`` it waits up to S seconds for idle, then
        400 "Timed out waiting for idle state."."""
        try:
            timeout = float(request.query.get("timeout", "0"))
        except ValueError:
            return json_response({"detail": "timeout must be a number"}, status=422)
        core = self.engine.core
        if core.has_work() and timeout > 0:
            deadline = time.monotonic() + timeout
            while core.has_work() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            if core.has_work():
                return web.Response(status=400, text=FLUSH_TIMEOUT)
        if core.has_work():
            log.info("Cache not flushed because there are pending requests. #queue-req: %d, "
                     "#running-req: %d", len(core.waiting), len(core.running))
            return web.Response(status=400, text=FLUSH_FAILED)
        core.stats.reset_spec_average()
        core.cache.clear()
        log.info("Cache flushed successfully!")
        return web.Response(status=200, text=FLUSH_OK)

    async def metrics(self, request: web.Request) -> web.Response:
        if not self.args["enable_metrics"]:
            raise web.HTTPNotFound()
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST,
                                                "X-Simulated": "specgrid-sim"})

    def _snapshot(self) -> Snapshot:
        core = self.engine.core
        spec = self.engine.spec
        return Snapshot(running=len(core.running), queued=len(core.waiting),
                        token_usage=core.kv_used / max(1, core.max_total_tokens),
                        cache_hit_rate=core.cache.hit_rate,
                        num_retracted=core.stats.num_retractions_total,
                        max_total_tokens=core.max_total_tokens,
                        context_len=self.args["context_length"], used_tokens=core.kv_used,
                        spec_steps=spec.steps if spec is not None else 0,
                        spec_draft_tokens=spec.draft_tokens if spec is not None else 0)

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self.middleware], client_max_size=64 * 1024 * 1024)
        r = app.router
        for path, fn in (("/health", self.health_generate),
                         ("/health_generate", self.health_generate),
                         ("/ready", self.ready_endpoint),
                         ("/server_info", self.server_info_endpoint),
                         ("/get_server_info", self.server_info_endpoint),
                         ("/model_info", self.model_info), ("/get_model_info", self.model_info),
                         ("/metrics", self.metrics), ("/v1/models", self.models)):
            r.add_get(path, fn)
        r.add_route("*", "/flush_cache", self.flush_cache)
        r.add_post("/generate", self.api.generate)
        r.add_post("/v1/chat/completions", self.api.chat)
        r.add_post("/v1/completions", self.api.completions)
        return app

    # ------------------------------------------------------------------ life cycle
    async def _warmup(self) -> None:
        """SGLang's start-up warmup (entrypoints/http_server.py ``_execute_server_warmup``): one
        non-streaming generation of 8 tokens for "The capital city of France is" at
        temperature 0, counted in the metrics like any request, before the ready line."""
        text = "The capital city of France is"
        req = self.engine.new_request(prompt_text=text, prompt_tokens=prompt_tokens(text),
                                      max_new_tokens=8, temperature=0.0,
                                      rid="warmup_" + uuid.uuid4().hex)
        self.engine.submit(req)
        await self.api.wait_done(req)


    def request_shutdown(self, drain: bool) -> None:
        if drain and not self.draining:
            log.info("Received SIGTERM: draining running requests, health returns 503.")
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        else:
            self._stop.set()

    async def _drain(self) -> None:
        force = os.environ.get("SGL_FORCE_SHUTDOWN", "").lower() in ("1", "true")
        deadline = time.monotonic() + (0.0 if force else 15.0)
        while self.engine.core.has_work() and time.monotonic() < deadline and not self.hung:
            await asyncio.sleep(0.05)
        self._stop.set()

    async def _simulate_startup(self, seconds: float) -> dict[str, float]:
        """``--sim-startup-seconds`` spent in SGLang's start-up phases, with its log lines
        (engines/sglang/logphases.py): the shares are an assumption of the simulator (weights
        take most of a real start; CUDA graphs the rest), not a model. Returns each phase's
        seconds as slept."""
        took = {}
        for name, share, before, after in STARTUP_PHASES:
            if before:
                log.info(before)
            t0 = time.monotonic()
            if seconds > 0:
                await asyncio.sleep(seconds * share)
            took[name] = time.monotonic() - t0
            if after:
                log.info(after)
        return took

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await runner.setup()
        host, port = self.args["host"], self.args["port"]
        site = web.TCPSite(runner, host, port, backlog=4096, shutdown_timeout=1.0)
        try:
            await site.start()
        except OSError as exc:
            log.error("cannot listen on %s:%s: %s", host, port, exc)
            return 1
        loop.add_signal_handler(signal.SIGTERM, self.request_shutdown, True)
        loop.add_signal_handler(signal.SIGINT, self.request_shutdown, False)
        self.engine.start(log.info)
        log.info("HTTP server listening on http://%s:%s (simulated, engine %s)", host, port,
                 info.ENGINE_NAME)
        startup = float(self.args["sim"]["startup_seconds"])
        if startup > 0:
            log.info("Simulating start-up (loading weights, capturing CUDA graphs) for %.1f s",
                     startup)
        phases = await self._simulate_startup(startup)
        # SGLang 0.5.23's line (srt/entrypoints/engine.py), so a run records the simulator's
        # start-up phases as it records a real server's (engines/sglang/logphases.py)
        log.info("Engine startup timings (s): load_weight=%.2f, kv_cache_allocation=%.2f, "
                 "scheduler_e2e=%.2f, cuda_graph={decode=%.2f}, tokenizer_e2e=%.2f",
                 phases["load_weight"], phases["kv_cache_allocation"],
                 time.time() - IMPORTED_AT, phases["cuda_graph"], time.time() - IMPORTED_AT)
        await self._warmup()
        self.ready = True
        self.startup_time = time.time() - self.started_at
        log.info(READY_LINE)
        await self._stop.wait()
        log.info("Shutting down the simulated server.")
        if self.engine.loop is not None:
            await self.engine.loop.stop()
        try:
            await asyncio.wait_for(runner.cleanup(), 3.0)
        except TimeoutError:
            pass
        return 0


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", stream=sys.stderr, force=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = resolve(argv)
    except SimArgError as exc:
        print(f"specgrid-sim: error: {exc}", file=sys.stderr)
        return 2
    for name in cfg.not_modelled:
        print(f"[specgrid-sim] warning: --{name.replace('_', '-')} is accepted but not modelled "
              "by the simulator", file=sys.stderr, flush=True)
    _setup_logging()
    a = cfg.args
    log.info("specgrid-sim %s: SIMULATED SGLang server -- every number comes from the "
             "performance model (profile %r, %s), not from a GPU.", SIM_VERSION,
             cfg.profile.name, cfg.profile.path)
    spec = (f"{a['speculative_algorithm']} steps={a['speculative_num_steps']} "
            f"topk={a['speculative_eagle_topk']} draft_tokens={a['speculative_num_draft_tokens']}"
            f"{' adaptive' if a['speculative_adaptive'] else ''}"
            if a["speculative_algorithm"] else "off")
    log.info("model=%s tp_size=%s max_running_requests=%s speculative=%s time_scale=%s seed=%s",
             a["model_path"], a["tp_size"], a["max_running_requests"], spec,
             a["sim"]["time_scale"], a["sim"]["seed"])
    for note in cfg.notes:
        log.info(note)
    # SGLang overwrites this at start-up; the simulator records the caller's value and does too.
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    server_holder: list[SimServer] = []

    async def run() -> int:
        server_holder.append(SimServer(cfg))
        return await server_holder[0].serve()

    try:
        import uvloop  # optional: a faster event loop when installed

        return uvloop.run(run())
    except ImportError:
        return asyncio.run(run())
