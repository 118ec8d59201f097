"""One streamed request per call, recorded as a ``Timeline``: the requests and bodies of the two
endpoints (SGLang native ``/generate``, OpenAI ``/v1/chat/completions``), and sending a request
and parsing its stream (the parsers: actors/loadgen/sinks.py).

Arrival times: the transport's per-read stamp when it has one (``StampingTransport``), else
``perf_counter()`` when the read reaches the parser. Any exception ends the request with
``Timeline.error`` set; it never propagates (the cell goes on).
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter
from typing import Any

import httpx

from actors.loadgen.sinks import ChatSink, NativeSink
from actors.loadgen.spec import ClientSpec
from actors.loadgen.timeline import StreamError, Timeline
from actors.loadgen.transport import Follow, Send, StampingTransport, make_transport


def request_body(spec: ClientSpec, content: Any, max_new_tokens: int,
                 extra: dict[str, Any] | None = None) -> bytes:
    """The streamed body of ``spec``'s endpoint: ``content`` is the prompt text (``generate``)
    or the messages (``chat``); ``extra``'s top-level keys are merged in last."""
    body: dict[str, Any]
    if spec.endpoint == "generate":
        body = {
            "text": content,
            "sampling_params": {
                "max_new_tokens": max_new_tokens,
                "temperature": spec.temperature,
                "ignore_eos": spec.ignore_eos,
            },
            "stream": True,
        }
    else:
        body = {
            "model": spec.model,
            "messages": content,
            "max_tokens": max_new_tokens,
            "temperature": spec.temperature,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if spec.ignore_eos:
            body["ignore_eos"] = True  # SGLang / vLLM extension
    if extra:
        body.update(extra)
    return json.dumps(body).encode()


class Poster:
    """POST requests to ``spec``'s endpoint, the client's URL/header/timeout merge
    (``build_request``) done once. Each request is sent straight through the transport:
    ``AsyncClient.send`` adds auth/redirect/cookie/event-hook machinery a benchmark request
    does not use, at ~100 µs CPU per request (measured, see bench/README_loadgen.md)."""

    def __init__(self, spec: ClientSpec, client: httpx.AsyncClient) -> None:
        path = "/generate" if spec.endpoint == "generate" else "/v1/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "Accept-Encoding": "identity"}
        if spec.api_key:
            headers["Authorization"] = f"Bearer {spec.api_key}"
        tmpl = client.build_request("POST", spec.url.rstrip("/") + path, content=b"{}",
                                    headers=headers)
        self.url = tmpl.url
        self._extensions = tmpl.extensions
        self._headers = [(k, v) for k, v in tmpl.headers.raw if k.lower() != b"content-length"]

    def request(self, body: bytes) -> httpx.Request:
        return httpx.Request("POST", self.url, content=body, extensions=dict(self._extensions),
                             headers=[*self._headers, (b"Content-Length", b"%d" % len(body))])


def open_client(spec: ClientSpec, transport: httpx.AsyncBaseTransport | None
                ) -> tuple[httpx.AsyncBaseTransport, httpx.AsyncClient]:
    """``transport``, or the one ``spec.transport`` names, and an httpx client over it with
    ``spec``'s timeouts."""
    tr = transport if transport is not None else make_transport(
        spec.transport, tls_verify=spec.tls_verify, ca_bundle=spec.ca_bundle,
        keepalive_s=spec.keepalive_s)
    timeout = httpx.Timeout(spec.request_timeout_s, connect=spec.connect_timeout_s)
    return tr, httpx.AsyncClient(transport=tr, timeout=timeout)


async def preconnect(transport: httpx.AsyncBaseTransport, poster: Poster, n: int | None,
                     timeout: float) -> int:
    """Top the pool up to ``n`` idle connections to the endpoint's origin ahead of a window, so
    that no measured request's TTFT includes a connection set-up (docs/loadgen.md,
    "Connections before the window"); how many it opened. Only the raw transport can open
    connections without a request; a failure here is left to the requests to report."""
    if not n or not isinstance(transport, StampingTransport):
        return 0
    try:
        return await transport.preconnect(str(poster.url), n, timeout)
    except httpx.TransportError:
        return 0


async def _fail_status(resp: httpx.Response) -> None:
    body = b"".join([c async for c in resp.stream])  # type: ignore[union-attr]
    raise StreamError(f"HTTP {resp.status_code}: {body[:300].decode('utf-8', 'replace')}")


async def stream_into(send: Send, request: httpx.Request, tl: Timeline,
                      sink: NativeSink | ChatSink, then: Follow | None = None) -> None:
    """Send ``request`` and parse its streamed body into ``tl``; exceptions propagate.

    With the stamping transport the sink runs inside the socket's ``data_received`` callback
    (``consume``): no coroutine wake-up per read, and each read is parsed the moment it is
    stamped. Other transports: ``async for`` over the body, stamped when the parser sees it.
    ``tl.sent``: the transport's send stamp when it has one (taken right before the connection
    is taken and the request written), else just before handing the request to the transport.
    ``tl.end`` is the arrival of the body's last bytes. ``then``: handed to the stamping
    transport's ``consume``, which calls it the moment the body ended (it may write the next
    request on the same connection there); other transports ignore it."""
    tl.sent = perf_counter()
    resp = await send(request)
    try:
        src = resp.extensions.get("specgrid_stream")
        if src is not None:
            tl.sent = src.t_sent
        if resp.status_code != 200:
            await _fail_status(resp)
        if src is not None:
            await src.consume(sink.feed, then)
        else:
            feed = sink.feed
            async for data in resp.stream:  # type: ignore[union-attr]
                feed(data, perf_counter())
        tl.end = sink.t_last if sink.t_last is not None else perf_counter()
        sink.finish()
    finally:
        await resp.aclose()


async def run_request(
    kind: str, send: Send, request: httpx.Request, tl: Timeline, timeout_s: float,
    then: Follow | None = None,
) -> Timeline:
    """Run one request under an overall ``timeout_s``; any failure is recorded in ``tl.error``.
    ``then``: see :func:`stream_into`."""
    await run_into(send, request, tl, NativeSink(tl) if kind == "generate" else ChatSink(tl),
                   timeout_s, then)
    return tl


async def run_into(send: Send, request: httpx.Request, tl: Timeline,
                   sink: NativeSink | ChatSink, timeout_s: float,
                   then: Follow | None = None) -> None:
    """:func:`stream_into` under an overall ``timeout_s``, every failure mapped to one
    ``tl.error`` line (the one mapping for prompt requests and conversation rounds)."""
    try:
        async with asyncio.timeout(timeout_s):
            await stream_into(send, request, tl, sink, then)
    except TimeoutError:
        tl.error = f"timeout: no complete response within {timeout_s:g} s"
    except StreamError as exc:
        tl.error = str(exc)
    except httpx.TimeoutException as exc:
        tl.error = f"timeout: {type(exc).__name__}: {exc}"
    except httpx.HTTPError as exc:
        tl.error = f"{type(exc).__name__}: {exc}"
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # malformed event
        tl.error = f"bad event: {type(exc).__name__}: {exc}"
    except Exception as exc:  # a broken request ends itself, never the cell or conversation
        tl.error = f"{type(exc).__name__}: {exc}"
    if tl.end is None:
        tl.end = perf_counter()
