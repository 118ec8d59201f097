"""One streamed request per call, recorded as a ``Timeline``: the request bodies of the two
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
from actors.loadgen.timeline import StreamError, Timeline
from actors.loadgen.transport import Follow, Send


def generate_body(text: str, max_new_tokens: int, temperature: float, ignore_eos: bool,
                  extra: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "text": text,
        "sampling_params": {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
        },
        "stream": True,
    }
    if extra:
        body.update(extra)
    return json.dumps(body).encode()


def chat_body(text: str, model: str, max_new_tokens: int, temperature: float, ignore_eos: bool,
              extra: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_new_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True  # SGLang / vLLM extension
    if extra:
        body.update(extra)
    return json.dumps(body).encode()


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
