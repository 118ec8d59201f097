"""The source files the agent reads in the agentic conversations: Python modules of an invented
project assembled from the hand-written function bodies below (text written for this project),
so contexts grow to tens of thousands of tokens without shipping megabytes of prose."""

from __future__ import annotations

import random

# Function bodies with {noun} / {Noun} / {verb} / {Verb} to fill in; a module is a draw of them.
FUNC_BODIES = [
    """def {verb}_{noun}(self, {noun}: {Noun}, *, strict: bool = False) -> {Noun}:
    \"\"\"{Verb} one {noun} and return it; with strict, reject anything unexpected.\"\"\"
    if {noun} is None:
        raise ValueError("{noun} is required")
    key = self._key({noun})
    cached = self._cache.get(key)
    if cached is not None and not strict:
        return cached
    result = self._backend.{verb}({noun})
    self._cache[key] = result
    log.debug("{verb} %s -> %r", key, result)
    return result
""",
    """def {verb}_{noun}s(self, items: Iterable[{Noun}]) -> list[{Noun}]:
    \"\"\"{Verb} every {noun} in items, keeping their order and skipping duplicates.\"\"\"
    seen: set[str] = set()
    out: list[{Noun}] = []
    for item in items:
        ident = self._key(item)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(self.{verb}_{noun}(item))
    return out
""",
    """def _parse_{noun}(raw: str) -> {Noun}:
    \"\"\"Parse the text form of a {noun} (``name=value;...``).\"\"\"
    fields: dict[str, str] = {{}}
    for part in raw.split(";"):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep:
            raise ParseError(f"{noun}: expected name=value, got {{part!r}}")
        fields[name.strip()] = value.strip()
    return {Noun}(**fields)
""",
    """async def {verb}_{noun}_async(self, {noun}_id: str, timeout: float = 10.0) -> {Noun}:
    \"\"\"Fetch one {noun} from the remote service, retrying transient errors.\"\"\"
    delay = 0.1
    for attempt in range(self.max_attempts):
        try:
            async with asyncio.timeout(timeout):
                resp = await self._client.get(f"/{noun}s/{{{noun}_id}}")
            resp.raise_for_status()
            return {Noun}.from_dict(resp.json())
        except (TimeoutError, TransientError) as exc:
            log.warning("{noun} %s: attempt %d failed: %s", {noun}_id, attempt + 1, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_delay)
    raise Unavailable(f"{noun} {{{noun}_id}} unavailable after {{self.max_attempts}} attempts")
""",
    """def total_{noun}(self, {noun}s: Sequence[{Noun}]) -> Decimal:
    \"\"\"Sum of the {noun}s' amounts, in the store's currency.\"\"\"
    total = Decimal(0)
    for {noun} in {noun}s:
        amount = {noun}.amount
        if {noun}.currency != self.currency:
            amount = self.convert(amount, {noun}.currency, self.currency)
        total += amount
    return total.quantize(self.precision)
""",
    """@dataclass(frozen=True)
class {Noun}:
    \"\"\"One {noun} as stored; immutable, compared by value.\"\"\"

    name: str
    created: datetime
    size: int = 0
    tags: tuple[str, ...] = ()
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {{"name": self.name, "created": self.created.isoformat(), "size": self.size,
                "tags": list(self.tags), "parent": self.parent}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "{Noun}":
        return cls(name=data["name"], created=datetime.fromisoformat(data["created"]),
                   size=int(data.get("size", 0)), tags=tuple(data.get("tags", ())),
                   parent=data.get("parent"))
""",
    """def validate_{noun}(self, {noun}: {Noun}) -> list[str]:
    \"\"\"Every problem with {noun}, as messages; empty when it is valid.\"\"\"
    problems = []
    if not {noun}.name:
        problems.append("name is empty")
    if {noun}.size < 0:
        problems.append(f"size must be >= 0, got {{{noun}.size}}")
    if {noun}.parent is not None and {noun}.parent == {noun}.name:
        problems.append("a {noun} cannot be its own parent")
    for tag in {noun}.tags:
        if not TAG_RE.fullmatch(tag):
            problems.append(f"bad tag {{tag!r}}")
    return problems
""",
    """def iter_{noun}s(self, since: datetime | None = None, limit: int = 100) -> Iterator[{Noun}]:
    \"\"\"{Noun}s newer than since, oldest first, at most limit per page.\"\"\"
    cursor = None
    while True:
        page = self._store.page("{noun}s", after=cursor, since=since, limit=limit)
        if not page.items:
            return
        yield from page.items
        cursor = page.next_cursor
        if cursor is None:
            return
""",
    """def _key(self, obj: Any) -> str:
    \"\"\"Stable cache key of an object: its name, lower-cased, with separators normalised.\"\"\"
    name = getattr(obj, "name", obj)
    return str(name).strip().lower().replace(" ", "_")
""",
    """def close(self) -> None:
    \"\"\"Flush pending writes and release the backend; safe to call twice.\"\"\"
    if self._closed:
        return
    try:
        self._flush()
    finally:
        self._backend.close()
        self._closed = True
""",
]

VERBS = ["load", "store", "resolve", "refresh", "apply", "merge", "render", "fetch", "normalize"]


def camel(name: str) -> str:
    """``exit_code`` -> ``ExitCode``."""
    return "".join(w.capitalize() for w in name.split("_"))


def source_file(rng: random.Random, package: str, module: str, nouns: list[str],
                n_blocks: int) -> str:
    """A Python module of the project, built from the blocks above."""
    head = (f'"""{module.capitalize()} of {package}: '
            f'{", ".join(nouns)} handling."""\n\nfrom __future__ import annotations\n\n'
            "import asyncio\nimport logging\nimport re\n"
            "from collections.abc import Iterable, Iterator, Mapping, Sequence\n"
            "from dataclasses import dataclass\nfrom datetime import datetime\n"
            "from decimal import Decimal\nfrom typing import Any\n\n"
            f"from {package}.errors import ParseError, TransientError, Unavailable\n\n"
            "log = logging.getLogger(__name__)\nTAG_RE = re.compile(r\"[a-z0-9_-]{1,32}\")\n\n\n")
    parts = [head]
    methods = []
    seen: set[str] = set()
    for j in range(n_blocks):
        noun = nouns[j % len(nouns)]
        verb = VERBS[rng.randrange(len(VERBS))]
        body = FUNC_BODIES[rng.randrange(len(FUNC_BODIES))].format(
            noun=noun, Noun=camel(noun), verb=verb, Verb=verb.capitalize())
        name = body.split("(", 1)[0].split("\n")[-1]
        if name in seen:
            continue
        seen.add(name)
        if body.startswith(("def _parse", "@dataclass")):
            parts.append(body + "\n\n")
        else:
            methods.append("    " + body.replace("\n", "\n    ").rstrip() + "\n")
    parts.append(f"class {camel(module)}Service:\n"
                 f"    \"\"\"The {module} operations of {package}.\"\"\"\n\n"
                 "    max_attempts = 5\n    max_delay = 2.0\n\n"
                 "    def __init__(self, backend: Any, client: Any = None) -> None:\n"
                 "        self._backend = backend\n        self._client = client\n"
                 "        self._cache: dict[str, Any] = {}\n        self._closed = False\n\n"
                 + "\n".join(methods))
    return "".join(parts)


def fill(text: str, others: list[str], files: dict[str, str], size: int) -> str:
    """``text`` cut to ``size`` characters, or grown to it with the other modules' code (long
    modules of a real project read like their neighbours)."""
    j = 0
    while len(text) < size:
        text += "\n\n" + files[others[j % len(others)]]
        j += 1
    return text[:size]


def numbered(text: str, start: int = 1) -> str:
    """``text`` as ``read_file`` shows it: each line after its right-aligned number."""
    return "\n".join(f"{start + i:5d}  {line}" for i, line in enumerate(text.splitlines()))
