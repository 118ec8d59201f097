"""Streaming, memory-bounded readers of conversation files (JSONL line by line, JSON documents
with ``ijson``), with format detection and a count of malformed records (docs/agentic.md,
"Formats")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import ijson  # type: ignore[import-untyped]

from workloads.conversations.formats import (
    FORMATS,
    MOONCAKE_BLOCK_TOKENS,
    MalformedRecord,
    classify,
    convert,
)
from workloads.conversations.model import Conversation

HEAD_BYTES = 1 << 20
"""How much of a file format detection reads: a first line longer than this is taken as a
JSON document, not JSONL."""
REPORTED_EXAMPLES = 5
"""How many malformed records are listed by location in a report."""


class ConversationFormatError(ValueError):
    """A conversation file that cannot be read at all (missing, empty, or in no known
    format). Its message is one line naming the file."""


@dataclass
class LoadReport:
    """What reading one file found."""

    path: str
    format: str = "?"
    conversations: int = 0
    """Conversations yielded."""
    malformed: int = 0
    """Records counted and skipped."""
    examples: list[str] = field(default_factory=list)
    """``file:line: reason`` of the first few malformed records."""

    def bad(self, where: str, reason: str) -> None:
        self.malformed += 1
        if len(self.examples) < REPORTED_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    def summary(self) -> str:
        """One line: counts, then the first malformed records."""
        line = (f"{self.path}: {self.conversations} conversations ({self.format}), "
                f"{self.malformed} malformed records skipped")
        if self.examples:
            line += "; first: " + " | ".join(self.examples)
        return line


def _head(f: BinaryIO) -> bytes:
    head = f.read(HEAD_BYTES)
    f.seek(0)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


def _first_array_item(f: BinaryIO, prefix: str) -> Any:
    try:
        return next(ijson.items(f, prefix, use_float=True), None)
    except ijson.JSONError:
        return None
    finally:
        f.seek(0)


DETECT_LINES = 20
"""JSONL detection looks at up to this many complete lines of the head for a record that
parses (a broken first row is counted later, not taken for another format)."""


def _first_jsonl_record(head: bytes) -> Any:
    """The JSONL record that tells the format: the first line if it parses as an object, else
    the first of the next few lines that parses as an object of a known format; None when
    there is none (a multi-line JSON document, or not JSON)."""
    lines = [line for line in head.split(b"\n") if line.strip()]
    if len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last piece may be cut
    for i, line in enumerate(lines[:DETECT_LINES]):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and (i == 0 or classify(obj) is not None):
            return obj
    return None


def detect_format(path: str | Path) -> tuple[str, str]:
    """(format, container) of a file: container ``jsonl``, ``array`` (a JSON array of
    records) or ``trace`` (SGLang's ``{"conversations": [[turn...]...]}`` document). Raises
    :class:`ConversationFormatError` naming the file when it is in none of them."""
    p = Path(path)
    if not p.is_file():
        raise ConversationFormatError(f"conversation file {p} not found")
    with p.open("rb") as f:
        head = _head(f)
        if not head:
            raise ConversationFormatError(f"conversation file {p} is empty")
        if head[:1] == b"[":
            fmt = classify(_first_array_item(f, "item"))
            if fmt is not None and fmt != "sglang_agentic":
                return fmt, "array"
        elif head[:1] == b"{":
            fmt = classify(_first_jsonl_record(head))
            if fmt == "sglang_agentic":  # a trace document written on one line
                return fmt, "trace"
            if fmt is not None:
                return fmt, "jsonl"
            if isinstance(_first_array_item(f, "conversations.item"), list):
                return "sglang_agentic", "trace"
    raise ConversationFormatError(
        f"conversation file {p} is in no known format (expected JSONL or JSON of: "
        f"{', '.join(FORMATS)})")


def _jsonl_records(f: BinaryIO, name: str, report: LoadReport) -> Iterator[tuple[str, Any]]:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            yield f"{name}:{n}", json.loads(line)
        except ValueError as e:
            report.bad(f"{name}:{n}", f"not JSON ({e})")


def _document_records(f: BinaryIO, prefix: str, name: str,
                      report: LoadReport) -> Iterator[tuple[str, Any]]:
    n = 0
    try:
        for n, item in enumerate(ijson.items(f, prefix, use_float=True)):
            yield f"{name}:item {n}", item
    except ijson.JSONError as e:  # the document breaks off: what came before it stays
        report.bad(f"{name}:after item {n}", f"JSON syntax error ({e}); rest of file unread")


def iter_conversations(path: str | Path, fmt: str = "auto", report: LoadReport | None = None,
                       domain: str = "agentic",
                       block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Iterator[Conversation]:
    """Yield the conversations of ``path`` one at a time (``fmt``: ``auto`` or one of
    :data:`FORMATS`); malformed records are counted in ``report``. ``domain``: the label of
    conversations whose record carries none (``domain`` / ``category`` fields win)."""
    p = Path(path)
    detected, container = detect_format(p)
    if fmt != "auto" and fmt != detected:
        if fmt not in FORMATS:
            raise ConversationFormatError(
                f"unknown conversation format {fmt!r} for {p} (known: {', '.join(FORMATS)})")
        raise ConversationFormatError(f"conversation file {p} is {detected}, not {fmt}")
    rep = report if report is not None else LoadReport(str(p))
    rep.format = detected
    source = f"{p.name}:{detected}"
    with p.open("rb") as f:
        if container == "jsonl":
            records = _jsonl_records(f, p.name, rep)
        else:
            prefix = "conversations.item" if container == "trace" else "item"
            records = _document_records(f, prefix, p.name, rep)
        for k, (where, record) in enumerate(records):
            try:
                conv = convert(detected, record, f"{p.stem}-{k}", source, domain, block_tokens)
            except MalformedRecord as e:
                rep.bad(where, str(e))
                continue
            rep.conversations += 1
            yield conv


def load_conversations(path: str | Path, fmt: str = "auto", limit: int | None = None,
                       domain: str = "agentic",
                       block_tokens: int = MOONCAKE_BLOCK_TOKENS,
                       ) -> tuple[list[Conversation], LoadReport]:
    """The first ``limit`` conversations of ``path`` (all when None) and the report. Raises
    :class:`ConversationFormatError` when the file has no usable conversation."""
    report = LoadReport(str(path))
    it = iter_conversations(path, fmt, report, domain, block_tokens)
    convs = list(it if limit is None else itertools.islice(it, limit))
    if not convs:
        raise ConversationFormatError(
            f"conversation file {path} has no usable conversation ({report.summary()})")
    return convs, report
