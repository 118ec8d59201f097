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
_LF = ord("\n")


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


def split_events(buf: bytes) -> tuple[list[bytes], bytes]:
    """(data payloads of the complete events in ``buf``, the bytes of the incomplete rest)."""
    tail = b""
    if 13 in buf:  # CR (an int ``in`` bytes is one memchr)
        # CRLF -> LF. A trailing lone CR may be the first half of a CRLF split across reads:
        # it is kept back (un-normalised) and joined on the next feed.
        if buf.endswith(b"\r"):
            buf, tail = buf[:-1], b"\r"
        buf = buf.replace(b"\r\n", b"\n")
    # Events are found line by line with a one-byte search (memchr): an event of one line
    # ("data: {...}", SGLang's every event) is the bytes up to the first LF when the next byte
    # is LF too. Searching for the two-byte separator itself, or splitting on it, goes through
    # CPython's general substring search, several times slower per byte on the long
    # cumulative-text events of a native stream (bench/peer_side_by_side.py --count-reads).
    out: list[bytes] = []
    find = buf.find
    last = len(buf) - 1
    start = 0
    while True:
        i = find(b"\n", start)
        if i < 0 or i == last:  # no complete line, or not yet known whether the event ends
            break
        if buf[i + 1] == _LF:  # a one-line event
            if buf.startswith(b"data: ", start):
                out.append(buf[start + 6:i])
            elif i > start:
                payload = event_data(buf[start:i])
                if payload is not None:
                    out.append(payload)
            start = i + 2
            continue
        j = find(b"\n\n", i + 1)  # an event of several lines: up to its blank line
        if j < 0:
            break
        payload = event_data(buf[start:j])
        if payload is not None:
            out.append(payload)
        start = j + 2
    return out, (buf[start:] if start else buf) + tail


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
        out, self._buf = split_events(self._buf + data if self._buf else data)
        return out
