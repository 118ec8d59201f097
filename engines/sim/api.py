"""Generation endpoints: SGLang's native POST /generate and the OpenAI-compatible
POST /v1/chat/completions and /v1/completions (streaming and not).

Request parsing follows SGLang: native ``sampling_params`` (``max_new_tokens`` default 128,
``temperature`` default 1.0, ``ignore_eos``, ``stop``, ``sampling_seed``); OpenAI ``max_tokens`` /
``max_completion_tokens`` (default: up to the context length, so EOS decides), ``stop``,
``temperature``, ``seed``, ``ignore_eos`` (SGLang's extension), ``stream_options.include_usage``
and ``stream_options.continuous_usage_stats``, ``return_spec_tokens_details`` (SGLang's
extension: the request's speculative counts in ``sglext``, engines/sim/spec_fields.py).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from engines.sim.core import RequestError, SimEngine
from engines.sim.model import chat_prompt_text, chat_prompt_tokens, prompt_tokens
from engines.sim.scheduler import SimRequest
from engines.sim.wire import (
    DONE,
    NativeStream,
    OpenAIStream,
    broken_event,
    json_response,
    native_response,
    openai_response,
)

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Streamer(Protocol):
    def chunk(self, n: int, final: bool, now: float) -> bytes: ...


def native_error(status: int, message: str) -> web.Response:
    return json_response({"error": {"message": message}}, status=status)


def openai_error(status: int, message: str) -> web.Response:
    kind = {400: "BadRequestError", 500: "InternalServerError", 503: "ServiceUnavailableError"}
    return json_response({"object": "error", "message": message,
                              "type": kind.get(status, "Error"), "param": None, "code": status},
                             status=status)


def _stops(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _int_or(value: Any, default: int | None) -> int | None:
    return default if value is None else int(value)


def _float_or(value: Any, default: float) -> float:
    return default if value is None else float(value)


class Host(Protocol):
    """What the handlers need of the server that mounts them (engines/sim/server.py SimServer;
    a protocol, so that the server imports the API and not the other way round)."""

    engine: SimEngine
    model_name: str

    async def admit_api_request(self) -> tuple[bool, bool]: ...


class GenerationAPI:
    """Handlers bound to one server (a ``Host``)."""

    def __init__(self, server: Host) -> None:
        self.server = server
        self.engine = server.engine

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.read() or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(f"invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise RequestError("the JSON body must be an object")
        return body

    async def wait_done(self, req: SimRequest) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not req.done:
                fut = loop.create_future()
                req.waiter = fut
                await fut
                req.waiter = None
        finally:
            if not req.done:
                self.engine.abort(req)

    async def _stream(self, request: web.Request, req: SimRequest, streamer: Streamer,
                      first: bytes | None, malformed: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers=SSE_HEADERS)
        loop = asyncio.get_running_loop()
        broken_at = max(1, req.limit // 2) if malformed else -1
        sent = 0
        try:
            await resp.prepare(request)
            if first:
                await resp.write(first)
            while True:
                if req.n == sent and not req.done:
                    fut = loop.create_future()
                    req.waiter = fut
                    await fut
                    req.waiter = None
                    continue
                n, final = req.n, req.done
                if broken_at >= 0 and (final or n >= broken_at):
                    await resp.write(broken_event(req))
                    broken_at = -1
                data = streamer.chunk(n, final, time.monotonic())
                if data:
                    await resp.write(data)
                sent = n
                if final:
                    break
            await resp.write(DONE)
        except ConnectionError:
            pass
        finally:
            if not req.done:
                self.engine.abort(req)
        return resp

    async def _guarded(self, request: web.Request, openai: bool,
                       work: Callable[[dict[str, Any], bool], Awaitable[web.StreamResponse]]
                       ) -> web.StreamResponse:
        err = openai_error if openai else native_error
        fault_500, malformed = await self.server.admit_api_request()
        if fault_500:
            return err(500, "simulated internal server error (--sim-error-rate)")
        try:
            body = await self._body(request)
            return await work(body, malformed)
        except RequestError as exc:
            return err(400, str(exc))
        except (TypeError, ValueError) as exc:
            return err(400, f"invalid request: {exc}")

    # ------------------------------------------------------------------ native
    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(request, False, lambda b, m: self._generate(request, b, m))

    async def _generate(self, request: web.Request, body: dict[str, Any],
                        malformed: bool) -> web.StreamResponse:
        text, ids = body.get("text"), body.get("input_ids")
        if text is None and ids is None:
            raise RequestError("Either text or input_ids should be provided.")
        sp = body.get("sampling_params") or {}
        if isinstance(sp, list):
            sp = sp[0] if sp else {}
        stream = bool(body.get("stream", False))
        batch = isinstance(text, list) or (ids is not None and ids and isinstance(ids[0], list))
        prompts: list[tuple[str, int]]
        if text is not None:
            texts = text if isinstance(text, list) else [text]
            prompts = [(str(t), prompt_tokens(str(t))) for t in texts]
        else:
            id_lists: list[Any] = list(ids) if batch else [ids]  # type: ignore[arg-type]
            prompts = [(" ".join(map(str, x)), max(1, len(x))) for x in id_lists]
        if batch and stream:
            raise RequestError("the simulator does not stream batched /generate requests")
        rid = body.get("rid")
        reqs = []
        for i, (ptext, ptok) in enumerate(prompts):
            r_id = (rid[i] if isinstance(rid, list) else rid) if rid else uuid.uuid4().hex
            reqs.append(self.engine.new_request(
                prompt_text=ptext, prompt_tokens=ptok,
                max_new_tokens=_int_or(sp.get("max_new_tokens"), 128) or 0,
                ignore_eos=bool(sp.get("ignore_eos", False)), stop=_stops(sp.get("stop")),
                temperature=_float_or(sp.get("temperature"), 1.0),
                sampling_seed=sp.get("sampling_seed"), rid=str(r_id)))
        for r in reqs:
            r.stream = stream
            self.engine.submit(r)
        spec = self.engine.spec.draft_tokens if self.engine.spec is not None else None
        # SGLang adds its request time stats to meta_info only with --enable-metrics
        timings = bool(self.engine.cfg.args.get("enable_metrics"))
        if stream:
            r = reqs[0]
            return await self._stream(request, r, NativeStream(r, r.rid, spec, timings), None,
                                      malformed)
        await asyncio.gather(*(self.wait_done(r) for r in reqs))
        now = time.monotonic()
        out = [native_response(r, r.rid, spec, now, timings) for r in reqs]
        return json_response(out if batch else out[0])

    # ------------------------------------------------------------------ OpenAI
    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(request, True, lambda b, m: self._openai(request, b, m, True))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(request, True, lambda b, m: self._openai(request, b, m, False))

    async def _openai(self, request: web.Request, body: dict[str, Any], malformed: bool,
                      chat: bool) -> web.StreamResponse:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise RequestError("messages must be a non-empty list")
            ptext, ptok = chat_prompt_text(messages), chat_prompt_tokens(messages)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list):
                if len(prompt) != 1:
                    raise RequestError("the simulator takes one prompt per completion request")
                prompt = prompt[0]
            if prompt is None:
                raise RequestError("prompt is required")
            ptext = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
            ptok = prompt_tokens(ptext) if isinstance(prompt, str) else max(1, len(prompt))
        if int(body.get("n") or 1) != 1:
            raise RequestError("the simulator supports n=1 only")
        ctx = self.engine.cfg.args["context_length"]
        max_tokens = _int_or(body.get("max_completion_tokens", body.get("max_tokens")), None)
        req = self.engine.new_request(
            prompt_text=ptext, prompt_tokens=ptok,
            max_new_tokens=max_tokens if max_tokens is not None else max(0, ctx - ptok),
            ignore_eos=bool(body.get("ignore_eos", False)), stop=_stops(body.get("stop")),
            temperature=_float_or(body.get("temperature"), 1.0),
            sampling_seed=body.get("seed"), rid=uuid.uuid4().hex)
        req.stream = bool(body.get("stream"))
        self.engine.submit(req)
        model = self.server.model_name
        spec = self.engine.spec
        spec_tokens = (spec.draft_tokens if spec is not None
                       and body.get("return_spec_tokens_details") else None)
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            streamer = OpenAIStream(req, model, chat, bool(opts.get("include_usage")),
                                    bool(opts.get("continuous_usage_stats")), spec_tokens)
            return await self._stream(request, req, streamer, streamer.first(), malformed)
        await self.wait_done(req)
        return json_response(openai_response(req, model, chat, spec_tokens))
