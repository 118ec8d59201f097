"""Server-sent-events framing on bytes.

An event ends at a blank line (``\\n\\n``; ``\\r\\n\\r\\n`` is tolerated by normalising CRLF).
Reads may split an event anywhere (even between ``\\r`` and ``\\n``) or carry several events;
the decoder buffers until an event is complete and returns the ``data`` payloads of complete
events only. Comment lines (``: keep-alive``) and other fields (``event:``, ``id:``,
``retry:``) are skipped; several ``data:`` lines of one event are joined with ``\\n`` as the
spec says. Nothing is decoded to ``str``: payloads stay ``bytes`` for the stream parsers.
"""

from __future__ import annotations

_DATA = b"data:"


def event_data(event: bytes) -> bytes | None:
    """The ``data`` payload of one complete event (without its terminating blank line), or None
    when the event carries no data field (comments, keep-alives)."""
    if event.startswith(b"data: ") and b"\n" not in event:  # the common case: one data line
        return event[6:]
    payload: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(_DATA):
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
            payload.append(value)
        elif line == b"data":
            payload.append(b"")
    if not payload:
        return None
    return b"\n".join(payload)


class SSEDecoder:
    """Incremental SSE decoder: ``feed(bytes) -> list of complete events' data payloads``."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    @property
    def pending(self) -> bytes:
        """Bytes of an incomplete event still buffered (non-empty at stream end = truncated)."""
        return self._buf

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            # CRLF -> LF. A trailing lone CR may be the first half of a CRLF split across reads;
            # it stays in the (un-normalised) remainder below and is joined on the next feed.
            tail_cr = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n")
            if tail_cr:
                events = buf[:-1].split(b"\n\n")
                self._buf = events.pop() + b"\r"
                return [p for p in map(event_data, events) if p is not None]
        if buf.endswith(b"\n\n") and buf.find(b"\n\n") == len(buf) - 2:  # exactly one event
            self._buf = b""
            payload = event_data(buf[:-2])
            return [] if payload is None else [payload]
        events = buf.split(b"\n\n")
        self._buf = events.pop()
        out: list[bytes] = []
        for ev in events:
            if ev.startswith(b"data: ") and b"\n" not in ev:  # the common case, inlined
                out.append(ev[6:])
            elif ev:
                payload = event_data(ev)
                if payload is not None:
                    out.append(payload)
        return out
