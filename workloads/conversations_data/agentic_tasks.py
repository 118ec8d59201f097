"""The hand-written text of the agentic conversations (written for this project): the agent's
system prompt and tool schemas, the six invented projects, the 34 issue statements, and what
each kind of bug looks like in a failing test run. ``make_agentic`` draws every conversation
from these."""

from __future__ import annotations

# (project, module, noun, kind, issue text)
Task = tuple[str, str, str, str, str]

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

STRING, INTEGER = {"type": "string"}, {"type": "integer"}


def _tool(name: str, description: str, required: list[str],
          **properties: dict[str, str]) -> dict[str, object]:
    """One tool schema in OpenAI's function format: its parameters an object of `properties`."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


TOOLS: list[dict[str, object]] = [
    _tool("list_dir", "List the files under a directory of the repository.", ["path"],
          path={"type": "string", "description": "Directory, relative to the root."}),
    _tool("grep", "Search the repository for a regular expression.", ["pattern"],
          pattern=STRING,
          path={"type": "string", "description": "Where to search (default: root)."}),
    _tool("read_file", "Read a file, optionally a range of lines.", ["path"],
          path=STRING, start=INTEGER, end=INTEGER),
    _tool("apply_patch", "Apply a unified diff to the working tree.", ["diff"], diff=STRING),
    _tool("run_tests", "Run the test suite or a subset of it.", [],
          target={"type": "string", "description": "Test path or node id."}),
    _tool("run_shell", "Run a shell command and return its output.", ["command"],
          command=STRING),
]

# --- projects: name, package, modules (name -> nouns the code talks about) ------------------
PROJECTS: dict[str, tuple[str, dict[str, list[str]]]] = {
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
TASKS: list[Task] = [
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

# --- bug kinds: kind -> (the failing test's error line, the fix's key phrase) ----------------
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
