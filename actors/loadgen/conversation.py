"""``run_conversations(spec) -> LoadResult``: multi-turn conversations as load (no Ray).

Each conversation replays round by round: round k's request carries the whole history
(:class:`workloads.conversations.render.History`), is streamed and timed like any single
request, and its reply (recorded or live) joins the history before round k+1 is due. The stream
sinks are subclassed here only to keep the reply text (for ``replay="live"``) and the server's
``cached_tokens`` (absent in a chat stream means 0 only under SGLang's
``--enable-cache-report``, so it is recorded as None). The load shapes, the per-round rows and
what ends a conversation: docs/agentic.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from time import perf_counter, process_time
from typing import Any

import httpx

from actors.loadgen.conversation_plan import (
    ROW_KEYS,
    ConversationLoadSpec,
    arrival_offsets,
    think_times,
    unrun_rows,
)
from actors.loadgen.dispatch import sleep_until
from actors.loadgen.spec import LoadResult
from actors.loadgen.streams import (
    ChatSink,
    NativeSink,
    Poster,
    Timeline,
    open_client,
    preconnect,
    request_body,
    run_into,
)
from actors.loadgen.tally import Tally
from actors.loadgen.timeline import Clock
from specgrid_metrics.requests import accept_length, percentile, request_timing
from workloads.conversations.model import Conversation
from workloads.conversations.render import History

_PLACEHOLDER = "\x00specgrid-context\x00"
"""Stands for the prompt / messages in a body template (a NUL cannot occur in the rest)."""


class NativeReplySink(NativeSink):
    """:class:`NativeSink` that also keeps the final event's ``text`` and ``cached_tokens``."""

    __slots__ = ("text", "cached_tokens")

    def __init__(self, tl: Timeline) -> None:
        super().__init__(tl)
        self.text: str | None = None
        self.cached_tokens: int | None = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.last is not None:
                obj = json.loads(self.last)
                self.text = obj.get("text")
                meta = obj.get("meta_info") or {}
                ct = meta.get("cached_tokens")
                self.cached_tokens = ct if isinstance(ct, int) else None


class ChatReplySink(ChatSink):
    """:class:`ChatSink` that also keeps ``usage.prompt_tokens_details.cached_tokens``; the
    reply text is the content the parent keeps (``parts``)."""

    __slots__ = ("cached_tokens",)

    def __init__(self, tl: Timeline) -> None:
        super().__init__(tl)
        self.cached_tokens: int | None = None

    def event(self, obj: dict[str, Any], t: float) -> None:
        super().event(obj, t)
        details = (obj.get("usage") or {}).get("prompt_tokens_details") or {}
        ct = details.get("cached_tokens")
        if isinstance(ct, int):
            self.cached_tokens = ct

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Client:
    """Builds each round's request (:class:`actors.loadgen.streams.Poster`, like the load
    generator's prompt requests) and sends it straight to the transport."""

    def __init__(self, spec: ConversationLoadSpec, client: httpx.AsyncClient,
                 transport: httpx.AsyncBaseTransport) -> None:
        self.spec = spec
        self.send = transport.handle_async_request
        self.poster = Poster(spec, client)
        self.request = self.poster.request
        self._templates: dict[int, tuple[bytes, bytes]] = {}

    def body(self, history: History, max_new_tokens: int) -> bytes:
        """The round's body: a template of the endpoint's body with a placeholder where the
        prompt / messages go, filled with History's incrementally encoded JSON (see
        :mod:`workloads.conversations.render`)."""
        parts = self._templates.get(max_new_tokens)
        if parts is None:
            body = request_body(self.spec, _PLACEHOLDER, max_new_tokens)
            pre, sep, post = body.partition(json.dumps(_PLACEHOLDER).encode())
            assert sep, "placeholder not found in the body template"
            parts = self._templates[max_new_tokens] = (pre, post)
        pre, post = parts
        value = (history.prompt_json() if self.spec.endpoint == "generate"
                 else history.messages_json())
        return b"".join((pre, value, post))


def _row(conv: Conversation, k: int, n: int, tl: Timeline, sink: NativeReplySink | ChatReplySink,
         chars: int, source: str | None, think: float, offset: float) -> dict[str, Any]:
    ok = tl.error is None
    timing = request_timing(tl.sent, tl.chunk_times, tl.chunk_tokens, tl.end, tl.output_tokens)
    row = {
        "conversation_id": conv.conversation_id, "turn_index": k, "num_turns": n,
        "domain": conv.domain, "status": "ok" if ok else "error", "error": tl.error,
        "context_tokens": tl.input_tokens, "cached_tokens": sink.cached_tokens,
        "request_chars": chars, "output_tokens": tl.output_tokens, "reply_source": source,
        "think_time_s": think, "scheduled_at": tl.scheduled + offset,
        "sent_at": tl.sent + offset, "dispatch_lag_s": tl.sent - tl.scheduled,
        "ttft_s": timing["ttft_s"], "e2e_s": timing["e2e_s"],
        "tpot_s": timing["tpot_s"] if ok else None, "itl_s": timing["itl_s"],
        "accept_length": accept_length(tl.output_tokens, tl.spec_verify_ct) if ok else None,
        "spec_verify_ct": tl.spec_verify_ct, "finish_reason": tl.finish_reason,
    }
    assert tuple(row) == ROW_KEYS
    return row


async def run_conversation(cl: _Client, conv: Conversation, index: int, due: float,
                           deadline: float | None, offset: float,
                           counter: Tally | None = None, clock: Clock | None = None
                           ) -> list[dict[str, Any]]:
    """Replay one conversation whose first round is due at ``due`` (perf_counter s); think
    times waited and rows reported on ``clock`` (the server's modelled clock; wall when None)."""
    clock = clock or Clock(due)
    spec = cl.spec
    n = spec.turns_of(conv)
    thinks = think_times(spec, conv, index)
    history = History(conv, spec.replay, spec.template)
    rows: list[dict[str, Any]] = []
    for k in range(n):
        due += clock.wall(thinks[k])
        if deadline is not None and due >= deadline:
            rows += unrun_rows(conv, k, n, "not_run", "load window ended")
            break
        await sleep_until(due)
        history.request(k)
        body = cl.body(history, conv.turns[k].output_tokens or spec.max_new_tokens)
        tl = Timeline(due)
        if counter is not None:
            counter.begin(tl)
        sink: NativeReplySink | ChatReplySink = (
            NativeReplySink(tl) if spec.endpoint == "generate" else ChatReplySink(tl))
        await run_into(cl.send, cl.request(body), tl, sink, spec.request_timeout_s)
        if counter is not None:
            counter.end(tl)
        source = history.reply(k, sink.text) if tl.error is None else None
        rows.append(_row(conv, k, n, clock.modelled(tl), sink, len(body), source, thinks[k],
                         offset))
        if tl.error is not None:
            rows += unrun_rows(conv, k + 1, n, "skipped", f"round {k} failed")
            break
        due = tl.end if tl.end is not None else perf_counter()
    return rows


class ConversationRun:
    """One client's share of a conversation cell, in two steps like a prompt cell's
    :class:`actors.loadgen.runner.LoadRun`: :meth:`prepare` builds the transport and client and
    opens one connection per conversation in flight (raw transport) before the cell's shared
    start, so no handshake lands in a round's TTFT and no client starts late; :meth:`measure`
    drives the conversations from ``start_at`` (their rows, one per round in conversation
    start order, and the client's stats); :meth:`aclose` closes the client. ``tally`` counts
    the rounds as they end (live progress). There is no warm-up: every round is measured."""

    def __init__(self, spec: ConversationLoadSpec,
                 transport: httpx.AsyncBaseTransport | None = None,
                 ) -> None:
        self.spec = spec
        self.tally = Tally()
        self._tr, self._client = open_client(spec, transport)
        self._cl = _Client(spec, self._client, self._tr)

    async def prepare(self) -> dict[str, Any]:
        spec = self.spec
        await preconnect(self._tr, self._cl.poster, spec.concurrency, spec.connect_timeout_s)
        return {"ready_at": time.time()}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def measure(self, start_at: float | None = None) -> LoadResult:
        """The conversations, from ``start_at`` (epoch s; already past or None = now)."""
        if start_at is not None:
            await asyncio.sleep(max(0.0, start_at - time.time()))
        spec, cl, counter = self.spec, self._cl, self.tally
        offset = time.time() - perf_counter()
        convs = spec.selected()
        results: list[list[dict[str, Any]]] = [[] for _ in convs]
        cpu0, t0 = process_time(), perf_counter()
        clock = Clock(t0, spec.clock_scale)
        deadline = t0 + clock.wall(spec.duration_s) if spec.duration_s is not None else None

        async def one(i: int, due: float) -> None:
            results[i] = await run_conversation(cl, convs[i], i, due, deadline, offset,
                                                counter, clock)

        if spec.closed_loop:
            todo = iter(range(len(convs)))

            async def worker() -> None:
                for i in todo:
                    now = perf_counter()
                    if deadline is not None and now >= deadline:
                        return
                    await one(i, now)

            assert spec.concurrency is not None
            await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
        else:
            sem = asyncio.Semaphore(spec.concurrency) if spec.concurrency else None
            tasks: list[asyncio.Task[None]] = []

            async def capped(i: int, due: float) -> None:
                try:
                    await one(i, due)
                finally:
                    if sem is not None:
                        sem.release()

            for i, off in enumerate(arrival_offsets(spec, convs)):
                due = t0 + clock.wall(off)
                if deadline is not None and due >= deadline:
                    break
                await sleep_until(due)
                if sem is not None:
                    await sem.acquire()
                tasks.append(asyncio.create_task(capped(i, due)))
            await asyncio.gather(*tasks)
        span, cpu = (perf_counter() - t0) / clock.scale, process_time() - cpu0  # modelled
        rows = [r for conv_rows in results for r in conv_rows]
        return LoadResult(rows, _stats(rows, span, cpu, t0 + offset, len(convs)))


async def run_conversations(spec: ConversationLoadSpec,
                            transport: httpx.AsyncBaseTransport | None = None) -> LoadResult:
    """Drive ``spec``'s conversations now; return their rows and stats. ``transport``: an
    httpx transport to use instead of building ``spec.transport`` (closed by the client)."""
    run = ConversationRun(spec, transport)
    try:
        await run.prepare()
        return await run.measure()
    finally:
        await run.aclose()


def _stats(rows: list[dict[str, Any]], wall: float, cpu: float, start: float,
           n_convs: int) -> dict[str, Any]:
    sent = [r for r in rows if r["status"] in ("ok", "error")]
    lags = [r["dispatch_lag_s"] for r in sent]
    # rounds after the first are due at their predecessor's end (+ think time): their lag is
    # the client's own delay; first rounds of a closed loop all fall due at the window start
    later = [r["dispatch_lag_s"] for r in sent if r["turn_index"] > 0]
    ok = sum(1 for r in rows if r["status"] == "ok")
    started = {r["conversation_id"] for r in sent}
    failed = {r["conversation_id"] for r in rows if r["status"] == "error"}
    return {
        "window_start": start, "window_end": start + wall, "window_s": wall,
        "conversations": n_convs,
        "conversations_started": len(started), "conversations_failed": len(failed),
        "rounds_sent": len(sent), "rounds_ok": ok,
        "rounds_per_s": ok / wall if wall > 0 else 0.0,
        "client_cpu_s": cpu, "client_cpu_per_round_ms": 1e3 * cpu / len(sent) if sent else None,
        "dispatch_lag_p50_s": percentile(lags, 50), "dispatch_lag_p99_s": percentile(lags, 99),
        "dispatch_lag_max_s": max(lags, default=None),
        "dispatch_lag_later_rounds_p99_s": percentile(later, 99),
        "event_loop": type(asyncio.get_running_loop()).__module__,
    }
