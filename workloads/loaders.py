"""Streaming readers of a drafter's training data and of prompt files: formats, the prompt of
a row and malformed rows as docs/workloads.md ("Benchmarking on the drafter's own data") says."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workloads.records import TextRow, domain_of

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet",)
KNOWN_SUFFIXES = JSONL_SUFFIXES + PARQUET_SUFFIXES
JSON_ARRAY_MAX_BYTES = 256 * 2**20
"""A `.json` array above this size is refused (it would have to be loaded whole)."""
SNIFF_ROWS = 20
"""A file none of whose first SNIFF_ROWS rows is in a known format is an unknown format."""
KEEP_PROBLEMS = 5
"""How many malformed rows are kept (file:line and reason) for the message."""
PARQUET_BATCH_ROWS = 2048

_USER_ROLES = frozenset({"user", "human"})
_ROLE_NAMES = {"human": "user", "gpt": "assistant", "bing": "assistant", "chatgpt": "assistant",
               "function_call": "assistant", "observation": "tool", "function": "tool"}
_PARQUET_COLUMNS = ("conversations", "messages", "prompt", "text", "source", "domain",
                    "prompt_id")


class TrainingDataError(ValueError):
    """Training data or a prompt file that cannot be used; the message is one line."""


class UnknownFormatError(TrainingDataError):
    """A file in none of the supported formats."""


@dataclass
class LoadStats:
    """What a read found: rows yielded, malformed rows (count and the first few locations)."""

    files: list[str] = field(default_factory=list)
    rows: int = 0
    malformed: int = 0
    problems: list[str] = field(default_factory=list)
    """`file:line: reason` of the first KEEP_PROBLEMS malformed rows."""

    def bad(self, file: str, line: int, reason: str) -> None:
        self.malformed += 1
        if len(self.problems) < KEEP_PROBLEMS:
            self.problems.append(f"{file}:{line}: {reason}")

    def describe(self) -> str:
        """One line: `N rows from F file(s); M malformed rows skipped (first: ...)`."""
        text = f"{self.rows} rows from {len(self.files)} file(s)"
        if self.malformed:
            text += (f"; {self.malformed} malformed row(s) skipped (first: "
                     + "; ".join(self.problems) + ")")
        return text


# --- rows -> prompt text ---------------------------------------------------------------------
def _content_text(content: Any) -> str:
    """A message content: a string, or OpenAI content parts (the text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, Mapping) and p.get("type", "text") == "text")
    raise ValueError(f"content is {type(content).__name__}, not text")


def render_turns(turns: Sequence[tuple[str, str]]) -> tuple[str, int]:
    """(prompt text, turns used) from (role, text) turns: the first user turn alone when it is
    the only one, else everything up to and including the last user turn as `role: text`."""
    users = [i for i, (role, _) in enumerate(turns) if role == "user"]
    if not users:
        raise ValueError("no user turn")
    last = users[-1]
    kept = turns[: last + 1]
    if len(kept) == 1:
        return kept[0][1], 1
    return "\n\n".join(f"{role}: {text}" for role, text in kept), len(kept)


def _turns(items: Any, role_key: str, text_key: str) -> list[tuple[str, str]]:
    if not isinstance(items, list | tuple) or not items:
        raise ValueError("empty or not a list of turns")
    out = []
    for item in items:
        if not isinstance(item, Mapping) or role_key not in item or text_key not in item:
            raise ValueError(f"a turn without {role_key!r}/{text_key!r}")
        role = str(item[role_key]).lower()
        role = "user" if role in _USER_ROLES else _ROLE_NAMES.get(role, role)
        out.append((role, _content_text(item[text_key])))
    return out


def row_format(obj: Any) -> str | None:
    """`sharegpt`, `messages`, `plain` or None for one decoded row."""
    if not isinstance(obj, Mapping):
        return None
    if "conversations" in obj:
        return "sharegpt"
    if "messages" in obj:
        return "messages"
    if "prompt" in obj or "text" in obj:
        return "plain"
    return None


def to_row(obj: Mapping[str, Any], file: str, line: int) -> TextRow:
    """One decoded row -> TextRow; ValueError with the reason when it is malformed."""
    kind = row_format(obj)
    if kind == "sharegpt":
        text, turns = render_turns(_turns(obj["conversations"], "from", "value"))
    elif kind == "messages":
        text, turns = render_turns(_turns(obj["messages"], "role", "content"))
    elif kind == "plain":
        value = obj.get("prompt", obj.get("text"))
        if not isinstance(value, str):
            raise ValueError("prompt/text is not a string")
        text, turns = value, 1
    else:
        raise ValueError("no conversations, messages, prompt or text field")
    if not text.strip():
        raise ValueError("empty prompt")
    source, domain, prompt_id = (str(obj[k]) if obj.get(k) not in (None, "") else None
                                 for k in ("source", "domain", "prompt_id"))
    return TextRow(text=text, source=source, domain=domain_of(source, domain), file=file,
                   line=line, turns=turns, prompt_id=prompt_id)


# --- files -----------------------------------------------------------------------------------
def training_files(path: Path) -> list[Path]:
    """The files a path stands for (a directory: its known files, recursively, sorted)."""
    if not path.exists():
        raise TrainingDataError(f"training data {path} not found")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file()
                       and p.suffix.lower() in KNOWN_SUFFIXES)
        if not files:
            raise TrainingDataError(f"{path}: no training files in the directory (expected "
                                    f"{', '.join(KNOWN_SUFFIXES)})")
        return files
    if path.suffix.lower() not in KNOWN_SUFFIXES:
        raise UnknownFormatError(
            f"{path}: unknown training-data format (expected JSONL, ShareGPT, OpenAI messages or "
            f"Parquet: {', '.join(KNOWN_SUFFIXES)})")
    return [path]


def iter_rows(path: str | Path, stats: LoadStats | None = None) -> Iterator[TextRow]:
    """Every readable row under `path` (a file or a directory), streaming; malformed rows are
    counted in `stats`. Raises TrainingDataError/UnknownFormatError for unusable files."""
    stats = stats if stats is not None else LoadStats()
    for file in training_files(Path(path)):
        stats.files.append(str(file))
        reader = _parquet_rows if file.suffix.lower() in PARQUET_SUFFIXES else _json_rows
        for row in reader(file, stats):
            stats.rows += 1
            yield row


def _unknown(file: Path, why: str) -> UnknownFormatError:
    return UnknownFormatError(
        f"{file}: unknown training-data format ({why}; expected JSONL with prompt/text, ShareGPT "
        "conversations, OpenAI messages, or Parquet with those columns)")


def _json_rows(file: Path, stats: LoadStats) -> Iterator[TextRow]:
    with file.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if not head:
        return
    if head.startswith(b"["):
        yield from _json_array_rows(file, stats)
        return
    if not head.startswith(b"{"):
        raise _unknown(file, "the first line is not a JSON object")
    recognised = False
    seen = 0
    with file.open("r", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            seen += 1
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                stats.bad(str(file), n, f"not JSON ({e.msg})")
                continue
            if row_format(obj) is None:
                if not recognised and seen >= SNIFF_ROWS:
                    raise _unknown(file, f"none of the first {SNIFF_ROWS} rows has "
                                   "conversations, messages, prompt or text")
                stats.bad(str(file), n, "no conversations, messages, prompt or text field")
                continue
            recognised = True
            try:
                yield to_row(obj, str(file), n)
            except (ValueError, TypeError) as e:
                stats.bad(str(file), n, str(e))
    if not recognised:
        raise _unknown(file, "no row has conversations, messages, prompt or text")


def _json_array_rows(file: Path, stats: LoadStats) -> Iterator[TextRow]:
    size = file.stat().st_size
    if size > JSON_ARRAY_MAX_BYTES:
        raise TrainingDataError(
            f"{file}: a {size / 2**20:.0f} MB JSON array cannot be streamed; convert it to JSON "
            f"lines (one object per line) or Parquet")
    try:
        items = json.loads(file.read_text(encoding="utf-8", errors="replace"))
    except ValueError as e:
        raise _unknown(file, f"not valid JSON ({e})") from None
    if not isinstance(items, list) or not any(row_format(o) for o in items[:SNIFF_ROWS]):
        raise _unknown(file, "the JSON array holds no conversations, messages, prompt or text")
    for n, obj in enumerate(items, 1):
        try:
            if not isinstance(obj, Mapping):
                raise ValueError("not an object")
            yield to_row(obj, str(file), n)
        except (ValueError, TypeError) as e:
            stats.bad(str(file), n, str(e))


def _parquet_rows(file: Path, stats: LoadStats) -> Iterator[TextRow]:
    import pyarrow.parquet as pq  # pyarrow is a dependency; imported here to keep startup light

    try:
        pf = pq.ParquetFile(file)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError variants for non-Parquet bytes
        raise _unknown(file, f"not a Parquet file ({str(e).splitlines()[0]})") from None
    names = set(pf.schema_arrow.names)
    columns = [c for c in _PARQUET_COLUMNS if c in names]
    if not {"conversations", "messages", "prompt", "text"} & names:
        raise _unknown(file, f"Parquet columns {sorted(names)} hold no conversations, messages, "
                       "prompt or text")
    n = 0
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
        for obj in batch.to_pylist():
            n += 1
            obj = {k: v for k, v in obj.items() if v is not None}
            try:
                yield to_row(obj, str(file), n)
            except (ValueError, TypeError) as e:
                stats.bad(str(file), n, str(e))


def read_prompt_file(path: Path) -> tuple[list[TextRow], LoadStats]:
    """A whole prompt file (small: shipped prompt sets, a long-context subset)."""
    stats = LoadStats()
    rows = list(iter_rows(path, stats))
    return rows, stats
