"""Writes agentic.jsonl: the agentic conversations shipped with specgrid (text written for this
project). Deterministic: ``python -m workloads.conversations_data.make_agentic`` rewrites the
same bytes.

Each conversation is an issue-fixing session of a coding agent in OpenAI chat format: a system
prompt, tool schemas (``tools``), the task, then rounds of assistant reply (reasoning and one
tool call as JSON in ``<tool_call>`` tags) and tool observation (directory listings, grep
results, file contents, test logs, diffs, command output). The source files the agent reads are
assembled from the hand-written building blocks below, so the contexts grow to tens of
thousands of tokens without shipping megabytes of prose. Conversation i has 5-20 rounds and a
final context planned between ~2k and ~32k tokens (4 characters per token).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "agentic.jsonl"
CHARS_PER_TOKEN = 4

SYSTEM = (
    "You are a software engineering agent working inside a checked-out repository. You solve "
    "the task by calling tools: inspect the code before changing it, make the smallest change "
    "that fixes the problem, run the tests after every change, and finish with a short "
    "summary of what you changed and why. Never guess file contents: read them. Keep each "
    "reply to one tool call.\n\n"
    "# Working rules\n\n"
    "1. Read the task twice. Restate to yourself what behaviour is wrong and what the correct "
    "behaviour is; if the task names a command, an input or an error message, that is your "
    "reproduction case.\n"
    "2. Explore before editing. List the package, search for the names the task uses, and "
    "read every function on the path from the entry point to the failure. Read whole "
    "functions, not single lines: the bug is often in a caller.\n"
    "3. Reproduce the failure with the test suite or a one-line command before you change "
    "anything. A fix you cannot show failing first is a guess.\n"
    "4. Change as little as possible. Do not reformat code you did not otherwise touch, do not "
    "rename public functions, do not add dependencies. Keep the project's style: type hints, "
    "docstrings in the imperative, errors raised as the project's own exception classes.\n"
    "5. Every fix gets a regression test that fails without the fix and passes with it. Put it "
    "next to the existing tests of the same module and name it after the behaviour, not after "
    "the task number.\n"
    "6. Run the whole test suite before you finish. If an unrelated test fails, say so in the "
    "summary instead of changing it.\n"
    "7. Tool output can be long. Quote only the lines you need in your reasoning, and prefer "
    "reading a range of lines when you already know where to look.\n"
    "8. When a tool call fails, read the error and correct the call; never repeat the same "
    "call unchanged.\n\n"
    "# Repository conventions\n\n"
    "- Python 3.12, packages under the repository root, tests under tests/ mirroring the "
    "package layout, pytest with fixtures in tests/conftest.py.\n"
    "- Money and other exact quantities use Decimal, never float. Times are timezone-aware "
    "datetimes in UTC inside the code and converted only at the edges.\n"
    "- Logging goes through the module's logger (log = logging.getLogger(__name__)); no print "
    "calls outside command-line entry points.\n"
    "- Public functions validate their arguments and raise ValueError (or the package's own "
    "subclass of it) with a message that names the bad value.\n"
    "- Caches are bounded and keyed by normalised identifiers; anything shared between "
    "threads or tasks is protected by a lock.\n\n"
    "# Finishing\n\n"
    "End with one message without a tool call: what was wrong, what you changed (files and "
    "functions), which test covers it, and the result of the last test run."
)

TOOLS = [
    {"type": "function", "function": {
        "name": "list_dir", "description": "List the files under a directory of the repository.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Directory, relative to the root."}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "grep", "description": "Search the repository for a regular expression.",
        "parameters": {"type": "object", "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Where to search (default: root)."}},
            "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file, optionally a range of lines.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "start": {"type": "integer"},
            "end": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "apply_patch", "description": "Apply a unified diff to the working tree.",
        "parameters": {"type": "object", "properties": {"diff": {"type": "string"}},
                       "required": ["diff"]}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the test suite or a subset of it.",
        "parameters": {"type": "object", "properties": {
            "target": {"type": "string", "description": "Test path or node id."}},
            "required": []}}},
    {"type": "function", "function": {
        "name": "run_shell", "description": "Run a shell command and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
]

# --- projects: name, package, modules (name -> nouns the code talks about) ------------------
PROJECTS = {
    "ledgerline": ("ledgerline", {
        "accounts": ["account", "balance", "currency"], "journal": ["entry", "posting", "period"],
        "reports": ["statement", "row", "total"], "importers": ["csv_row", "bank_line", "payee"],
        "rates": ["rate", "quote", "day"], "cli": ["command", "option", "output"]}),
    "tilecache": ("tilecache", {
        "store": ["tile", "key", "blob"], "http": ["request", "header", "etag"],
        "grid": ["zoom", "column", "row"], "eviction": ["entry", "age", "weight"],
        "config": ["setting", "layer", "source"], "metrics": ["counter", "gauge", "label"]}),
    "queuekit": ("queuekit", {
        "broker": ["message", "queue", "consumer"], "retry": ["attempt", "delay", "policy"],
        "worker": ["job", "slot", "heartbeat"], "schedule": ["trigger", "window", "job"],
        "serializer": ["payload", "schema", "field"], "admin": ["route", "user", "token"]}),
    "docsmith": ("docsmith", {
        "parser": ["token", "node", "heading"], "render": ["template", "block", "anchor"],
        "links": ["link", "target", "fragment"], "toc": ["section", "level", "entry"],
        "assets": ["image", "path", "digest"], "server": ["page", "route", "watcher"]}),
    "geofence": ("geofence", {
        "shapes": ["polygon", "point", "ring"], "index": ["cell", "bucket", "shape"],
        "events": ["crossing", "device", "fence"], "api": ["request", "fence", "owner"],
        "storage": ["record", "version", "shard"], "units": ["distance", "bearing", "meter"]}),
    "buildbot_lite": ("bblite", {
        "pipeline": ["stage", "step", "artifact"], "runner": ["process", "env", "exit_code"],
        "cache": ["layer", "digest", "hit"], "triggers": ["branch", "commit", "rule"],
        "notify": ["channel", "message", "status"], "config": ["job", "matrix", "include"]}),
}

# --- tasks: (project, module, noun, kind, issue text) -----------------------------------------
TASKS = [
    ("ledgerline", "accounts", "balance", "rounding",
     "Balances in EUR accounts are off by one cent after a transfer of 0.1 + 0.2. The total "
     "shown by `ledgerline balance` must equal the sum of postings exactly."),
    ("ledgerline", "journal", "period", "boundary",
     "Entries dated on the last day of a period are booked into the next period. Closing March "
     "leaves the 31 March entries open."),
    ("ledgerline", "importers", "csv_row", "parsing",
     "The CSV importer crashes on bank exports whose amount column uses a comma as the decimal "
     "separator (\"12,50\"). It should accept both forms."),
    ("ledgerline", "rates", "quote", "cache",
     "Exchange rates fetched for a day are fetched again for every posting of that day; an "
     "import of 3000 postings makes 3000 HTTP calls. Cache quotes per (currency, day)."),
    ("ledgerline", "reports", "total", "none_handling",
     "`ledgerline report --by payee` fails with TypeError when a posting has no payee."),
    ("ledgerline", "cli", "option", "validation",
     "Passing `--since 2024-13-01` prints a traceback instead of a clear error message."),
    ("tilecache", "store", "key", "encoding",
     "Tiles of layers whose name has a slash are stored under the wrong directory and never "
     "found again."),
    ("tilecache", "http", "etag", "header",
     "Conditional requests with If-None-Match never get a 304: the ETag comparison includes "
     "the quotes on one side only."),
    ("tilecache", "grid", "zoom", "boundary",
     "Requests for zoom level 0 return 400 although level 0 is valid."),
    ("tilecache", "eviction", "weight", "ordering",
     "The cache evicts the most recently used tiles first when it is full; it should evict the "
     "least recently used ones."),
    ("tilecache", "config", "layer", "validation",
     "A layer config with a negative max_zoom is accepted and then breaks the grid code."),
    ("tilecache", "metrics", "label", "concurrency",
     "Hit counters are lower than the number of hits when many requests run in parallel."),
    ("queuekit", "broker", "consumer", "ordering",
     "Messages with the same ordering key are sometimes delivered to two consumers at once."),
    ("queuekit", "retry", "delay", "overflow",
     "After about 60 retries the backoff delay becomes negative and jobs retry in a hot loop."),
    ("queuekit", "worker", "heartbeat", "timeout",
     "Workers that are busy for longer than the heartbeat interval are declared dead and their "
     "jobs run twice."),
    ("queuekit", "schedule", "window", "timezone",
     "Jobs scheduled for 02:30 local time run twice on the day the clocks go back."),
    ("queuekit", "serializer", "field", "none_handling",
     "Payloads with an optional field set to null fail schema validation."),
    ("queuekit", "admin", "token", "validation",
     "Expired admin tokens are still accepted for one hour after expiry."),
    ("docsmith", "parser", "heading", "parsing",
     "Headings that contain inline code (`## The `run` command`) lose the code span."),
    ("docsmith", "links", "fragment", "encoding",
     "Links to headings with non-ASCII characters produce anchors that do not match the "
     "rendered ids."),
    ("docsmith", "toc", "level", "boundary",
     "The table of contents drops the last heading of a document when it is at level 6."),
    ("docsmith", "render", "template", "cache",
     "Changing a template while `docsmith serve` runs has no effect until the server restarts."),
    ("docsmith", "assets", "digest", "ordering",
     "Two builds of the same docs produce different asset digests: the digest depends on the "
     "directory listing order."),
    ("geofence", "shapes", "polygon", "boundary",
     "Points exactly on a polygon's edge are reported as outside; the spec says inside."),
    ("geofence", "index", "bucket", "overflow",
     "Fences near the antimeridian (longitude 180) are never matched."),
    ("geofence", "events", "crossing", "ordering",
     "Exit events are sometimes emitted before the matching enter event for fast devices."),
    ("geofence", "units", "distance", "rounding",
     "Distances under one metre are rounded to zero, so proximity alerts at 0.5 m never fire."),
    ("geofence", "storage", "version", "concurrency",
     "Two concurrent updates to one fence both succeed and one of them is silently lost."),
    ("buildbot_lite", "pipeline", "artifact", "none_handling",
     "A stage without artifacts makes the next stage fail with KeyError: 'artifacts'."),
    ("buildbot_lite", "runner", "exit_code", "validation",
     "Steps killed by a signal are reported as successful (exit code None treated as 0)."),
    ("buildbot_lite", "cache", "digest", "encoding",
     "The layer cache misses on every run on Windows agents: paths are hashed with backslashes."),
    ("buildbot_lite", "triggers", "rule", "parsing",
     "Branch rules with a trailing slash (`release/`) match nothing."),
    ("buildbot_lite", "config", "matrix", "ordering",
     "Matrix jobs run in a different order on every run, which makes the logs hard to compare."),
    ("buildbot_lite", "notify", "status", "timeout",
     "A slow chat webhook blocks the whole pipeline for up to five minutes."),
]

# --- building blocks of source files ----------------------------------------------------------
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
FAILURES = {
    "rounding": ("AssertionError: assert Decimal('0.31') == Decimal('0.30')", "quantize"),
    "boundary": ("AssertionError: assert 3 == 4", "<="),
    "parsing": ("ValueError: could not convert string to float: '12,50'", "partition"),
    "cache": ("AssertionError: expected 1 call, got 3000", "_cache"),
    "none_handling": ("TypeError: '<' not supported between instances of 'NoneType' and 'str'",
                      "is None"),
    "validation": ("Failed: DID NOT RAISE <class 'ValueError'>", "raise ValueError"),
    "encoding": ("AssertionError: assert 'a%2Fb' == 'a/b'", "quote"),
    "header": ("AssertionError: assert 200 == 304", "strip('\"')"),
    "ordering": ("AssertionError: assert ['c', 'b', 'a'] == ['a', 'b', 'c']", "sorted"),
    "concurrency": ("AssertionError: assert 9731 == 10000", "with self._lock"),
    "overflow": ("AssertionError: assert -0.125 >= 0", "min("),
    "timeout": ("AssertionError: job ran 2 times, expected 1", "deadline"),
    "timezone": ("AssertionError: assert 2 == 1", "fold"),
}


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
    cls = "".join(w.capitalize() for w in module.split("_")) + "Service"
    methods = []
    seen: set[str] = set()
    for j in range(n_blocks):
        noun = nouns[j % len(nouns)]
        verb = VERBS[rng.randrange(len(VERBS))]
        body = FUNC_BODIES[rng.randrange(len(FUNC_BODIES))].format(
            noun=noun, Noun="".join(w.capitalize() for w in noun.split("_")),
            verb=verb, Verb=verb.capitalize())
        name = body.split("(", 1)[0].split("\n")[-1]
        if name in seen:
            continue
        seen.add(name)
        if body.startswith(("def _parse", "@dataclass")):
            parts.append(body + "\n\n")
        else:
            methods.append("    " + body.replace("\n", "\n    ").rstrip() + "\n")
    parts.append(f"class {cls}:\n    \"\"\"The {module} operations of {package}.\"\"\"\n\n"
                 "    max_attempts = 5\n    max_delay = 2.0\n\n"
                 "    def __init__(self, backend: Any, client: Any = None) -> None:\n"
                 "        self._backend = backend\n        self._client = client\n"
                 "        self._cache: dict[str, Any] = {}\n        self._closed = False\n\n"
                 + "\n".join(methods))
    return "".join(parts)


def numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{start + i:5d}  {line}" for i, line in enumerate(text.splitlines()))


def test_log(rng: random.Random, package: str, module: str, kind: str, passed: bool,
             n_tests: int) -> str:
    lines = ["=" * 29 + " test session starts " + "=" * 30,
             "platform linux -- Python 3.12.4, pytest-8.3.2, pluggy-1.5.0",
             f"rootdir: /workspace/{package}", "configfile: pyproject.toml",
             f"collected {n_tests} items", ""]
    files = sorted({f"tests/test_{m}.py" for m in [module, "cli", "errors", "models"]})
    for f in files:
        k = max(1, n_tests // len(files))
        marks = "." * k
        if not passed and f == f"tests/test_{module}.py":
            marks = marks[:-2] + "F."
        lines.append(f"{f} {marks:<60} [{rng.randrange(10, 100):3d}%]")
    if passed:
        lines.append(f"\n============================== {n_tests} passed in "
                     f"{rng.uniform(0.8, 9.0):.2f}s ===============================")
        return "\n".join(lines)
    err, _ = FAILURES[kind]
    lines += ["", "=" * 35 + " FAILURES " + "=" * 35,
              f"_________________________ test_{module}_{kind} __________________________", "",
              f"    def test_{module}_{kind}(service):",
              f">       result = service.check_{kind}()", "",
              f"tests/test_{module}.py:{rng.randrange(20, 300)}: ",
              "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
              f"{package}/{module}.py:{rng.randrange(20, 200)}: in check_{kind}",
              "    return self._apply(items)", f"E   {err}",
              "", "=" * 27 + " short test summary info " + "=" * 28,
              f"FAILED tests/test_{module}.py::test_{module}_{kind} - {err[:60]}",
              f"========================= 1 failed, {n_tests - 1} passed in "
              f"{rng.uniform(0.8, 9.0):.2f}s ========================="]
    return "\n".join(lines)


def call(name: str, thought: str, **args: object) -> str:
    return (f"{thought}\n<tool_call>\n" + json.dumps({"name": name, "arguments": args})
            + "\n</tool_call>")


def conversation(i: int, task: tuple[str, str, str, str, str]) -> dict[str, object]:
    project, module, noun, kind, issue = task
    package, modules = PROJECTS[project]
    rng = random.Random(f"specgrid-agentic-{i}")
    n_rounds = 5 + (i * 7) % 16  # 5..20
    target_chars = int((2000 + (30000 * i) / (len(TASKS) - 1)) * CHARS_PER_TOKEN)
    task_text = (f"Repository: {project} (package `{package}`).\n\n"
                 f"Task: {issue}\n\nFix it and make sure the tests pass.")
    messages: list[dict[str, object]] = [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": task_text}]
    size = len(SYSTEM) + len(task_text) + 2500  # + tool schemas
    files = {m: source_file(random.Random(f"{project}-{m}-{i}"), package, m, ns,
                            8 + rng.randrange(14))
             for m, ns in modules.items()}
    others = [m for m in modules if m != module]
    rng.shuffle(others)
    fix_hint = FAILURES[kind][1]
    tc = 0

    def step(reply: str, observation: str) -> None:
        nonlocal size, tc
        tc += 1
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "tool", "tool_call_id": f"call_{tc}", "content": observation})
        size += len(reply) + len(observation)

    def budget(rounds_left: int) -> int:
        return max(600, (target_chars - size) // max(1, rounds_left))

    step(call("list_dir", "I'll start by looking at the layout of the package.",
              path=package),
         "\n".join([f"{package}/__init__.py", f"{package}/errors.py"]
                   + [f"{package}/{m}.py" for m in modules]
                   + ["tests/conftest.py"] + [f"tests/test_{m}.py" for m in modules]
                   + ["pyproject.toml", "README.md"]))
    src = files[module]
    hits = [f"{package}/{module}.py:{n + 1}:{line.strip()}"
            for n, line in enumerate(src.splitlines()) if noun in line][:25]
    step(call("grep", f"The task is about {noun}s; let me find where they are handled.",
              pattern=noun, path=package), "\n".join(hits) or "(no matches)")
    slots = n_rounds - 3  # assistant replies: list_dir, grep, the plan, the summary
    natural = ["read_main", "run_fail", "patch", "run_pass", "patch_test", "run_pass2"]
    priority = ["read_main", "patch", "run_pass", "run_fail", "patch_test", "run_pass2"]
    keep = set(priority[:slots])
    extras = ["read_other" if j % 3 != 2 else "shell" for j in range(max(0, slots - 6))]
    plan = [a for a in natural[:2] if a in keep] + extras + [a for a in natural[2:] if a in keep]
    for idx, action in enumerate(plan):
        reads_left = sum(1 for a in plan[idx:] if a in ("read_main", "read_other"))
        rounds_left = max(1, reads_left)
        if action == "read_main":
            text = numbered(fill(src, others, files, max(budget(rounds_left), 1500)))
            step(call("read_file", f"Reading {module}.py in full before changing anything.",
                      path=f"{package}/{module}.py"), text)
        elif action == "read_other":
            m = others[idx % len(others)]
            text = numbered(fill(files[m], others, files, budget(rounds_left)))
            step(call("read_file", f"{module}.py calls into {m}.py; checking how {m} "
                                   f"treats a {noun} there.", path=f"{package}/{m}.py"), text)
        elif action == "shell":
            out = "\n".join(f"{rng.randrange(1, 9)} files changed, "
                            f"{rng.randrange(5, 300)} insertions(+), "
                            f"{rng.randrange(0, 120)} deletions(-)  {h:07x} "
                            f"{rng.choice(['fix', 'refactor', 'docs', 'test'])}: {module} "
                            f"{rng.choice(nouns_of(modules))}"
                            for h in (rng.randrange(16**7) for _ in range(30)))
            step(call("run_shell", f"Checking recent history of {module}.py for related "
                                   "changes.",
                      command=f"git log --shortstat --oneline -30 -- {package}/{module}.py"),
                 out)
        elif action == "run_fail":
            step(call("run_tests", "Let me reproduce the failure first.",
                      target=f"tests/test_{module}.py"),
                 test_log(rng, package, module, kind, False, 40 + rng.randrange(200)))
        elif action in ("patch", "patch_test"):
            if action == "patch":
                ln = rng.randrange(20, 200)
                diff = (f"--- a/{package}/{module}.py\n+++ b/{package}/{module}.py\n"
                        f"@@ -{ln},7 +{ln},8 @@\n     def check_{kind}(self, items):\n"
                        f"-        return self._apply(items)\n"
                        f"+        # {fix_hint}: see the task ({kind})\n"
                        f"+        return self._apply(self._prepare_{noun}s(items))\n")
                thought = (f"The {kind} problem comes from check_{kind} passing the raw "
                           f"{noun}s through; I'll prepare them first.")
            else:
                diff = (f"--- a/tests/test_{module}.py\n+++ b/tests/test_{module}.py\n"
                        f"@@ -1,3 +1,12 @@\n+def test_{noun}_{kind}_regression(service):\n"
                        f"+    \"\"\"The case from the task must keep working.\"\"\"\n"
                        f"+    items = service.sample_{noun}s(3)\n"
                        f"+    assert service.check_{kind}(items) == service.expected(items)\n")
                thought = "Adding a regression test for the exact case in the task."
            step(call("apply_patch", thought, diff=diff), "Patch applied cleanly.\n" + diff)
        elif action in ("run_pass", "run_pass2"):
            step(call("run_tests", "Running the tests again.", target="tests"),
                 test_log(rng, package, module, kind, True, 40 + rng.randrange(200)))
    test_note = (" and a regression test covers the case from the task" if "patch_test" in plan
                 else "; the existing tests cover the case from the task")
    messages.append({"role": "assistant", "content": (
        f"Done. The {kind} problem in `{package}/{module}.py` is fixed: check_{kind} now "
        f"prepares the {noun}s before applying them{test_note}."
        + (" The full test suite passes." if "run_pass" in plan else
           " I did not run the full suite; please run it before merging."))})
    return {"id": f"agentic-{i:03d}", "domain": "agentic", "source": "specgrid-agentic",
            "project": project, "tools": TOOLS, "messages": messages}


def fill(text: str, others: list[str], files: dict[str, str], size: int) -> str:
    """``text`` cut to ``size`` characters, or grown to it with the other modules' code (long
    modules of a real project read like their neighbours)."""
    j = 0
    while len(text) < size:
        text += "\n\n" + files[others[j % len(others)]]
        j += 1
    return text[:size]


def nouns_of(modules: dict[str, list[str]]) -> list[str]:
    return sorted({n for ns in modules.values() for n in ns})


def main() -> None:
    with OUT.open("w") as f:
        for i, task in enumerate(TASKS):
            f.write(json.dumps(conversation(i, task), separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
