"""Writes agentic.jsonl: the agentic conversations shipped with specgrid (text written for this
project). Deterministic: ``python -m workloads.conversations_data.make_agentic`` rewrites the
same bytes.

Each conversation is an issue-fixing session of a coding agent in OpenAI chat format: a system
prompt, tool schemas (``tools``), the task, then rounds of assistant reply (reasoning and one
tool call as JSON in ``<tool_call>`` tags) and tool observation (directory listings, grep
results, file contents, test logs, diffs, command output). The text comes from
``agentic_tasks`` (prompt, tools, projects, issues) and ``agentic_sources`` (the source files
the agent reads, assembled from hand-written building blocks, so the contexts grow to tens of
thousands of tokens without shipping megabytes of prose). Conversation i has 5-20 rounds and a
final context planned between ~2k and ~32k tokens (4 characters per token).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from workloads.conversations_data.agentic_sources import fill, numbered, source_file
from workloads.conversations_data.agentic_tasks import (
    FAILURES,
    PROJECTS,
    SYSTEM,
    TASKS,
    TOOLS,
    Task,
)

OUT = Path(__file__).resolve().parent / "agentic.jsonl"
CHARS_PER_TOKEN = 4


@dataclass
class Session:
    """One conversation while it is written: its task, the project's source files, the
    messages so far and their size in characters (the tool schemas counted as 2500)."""

    package: str
    modules: dict[str, list[str]]
    module: str
    noun: str
    kind: str
    rng: random.Random
    target_chars: int
    files: dict[str, str]
    others: list[str]  # the task module's neighbours, in the order the agent reads them
    messages: list[dict[str, object]] = field(default_factory=list)
    size: int = 2500
    calls: int = 0

    def say(self, role: str, content: str) -> None:
        """A message without a tool call (the prompt, the task, the closing summary)."""
        self.messages.append({"role": role, "content": content})
        self.size += len(content)

    def step(self, reply: str, observation: str) -> None:
        """One round: the assistant's tool call and the tool's answer."""
        self.calls += 1
        self.messages.append({"role": "assistant", "content": reply})
        self.messages.append({"role": "tool", "tool_call_id": f"call_{self.calls}",
                              "content": observation})
        self.size += len(reply) + len(observation)

    def budget(self, rounds_left: int) -> int:
        """Characters for the next file read: what is left to the target, shared by the reads
        still to come."""
        return max(600, (self.target_chars - self.size) // max(1, rounds_left))


def test_log(s: Session, passed: bool) -> str:
    """A pytest run of the project: all passing, or the task's test failing."""
    rng, package, module, kind = s.rng, s.package, s.module, s.kind
    n_tests = 40 + rng.randrange(200)
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


def start(i: int, task: Task) -> Session:
    """Conversation i's session with its system prompt and task; the project's files drawn."""
    project, module, noun, kind, issue = task
    package, modules = PROJECTS[project]
    rng = random.Random(f"specgrid-agentic-{i}")
    target_chars = int((2000 + (30000 * i) / (len(TASKS) - 1)) * CHARS_PER_TOKEN)
    files = {m: source_file(random.Random(f"{project}-{m}-{i}"), package, m, ns,
                            8 + rng.randrange(14))
             for m, ns in modules.items()}
    others = [m for m in modules if m != module]
    rng.shuffle(others)
    s = Session(package, modules, module, noun, kind, rng, target_chars, files, others)
    s.say("system", SYSTEM)
    s.say("user", f"Repository: {project} (package `{package}`).\n\n"
                  f"Task: {issue}\n\nFix it and make sure the tests pass.")
    return s


def explore(s: Session) -> None:
    """The first two rounds: list the package, grep for the task's noun."""
    package, module, noun = s.package, s.module, s.noun
    s.step(call("list_dir", "I'll start by looking at the layout of the package.",
                path=package),
           "\n".join([f"{package}/__init__.py", f"{package}/errors.py"]
                     + [f"{package}/{m}.py" for m in s.modules]
                     + ["tests/conftest.py"] + [f"tests/test_{m}.py" for m in s.modules]
                     + ["pyproject.toml", "README.md"]))
    hits = [f"{package}/{module}.py:{n + 1}:{line.strip()}"
            for n, line in enumerate(s.files[module].splitlines()) if noun in line][:25]
    s.step(call("grep", f"The task is about {noun}s; let me find where they are handled.",
                pattern=noun, path=package), "\n".join(hits) or "(no matches)")


def action_plan(n_rounds: int) -> list[str]:
    """The rounds after exploring, in order: the core actions that fit (most needed first),
    extra reads and shell calls in between."""
    slots = n_rounds - 3  # assistant replies: list_dir, grep, the plan, the summary
    natural = ["read_main", "run_fail", "patch", "run_pass", "patch_test", "run_pass2"]
    priority = ["read_main", "patch", "run_pass", "run_fail", "patch_test", "run_pass2"]
    keep = set(priority[:slots])
    extras = ["read_other" if j % 3 != 2 else "shell" for j in range(max(0, slots - 6))]
    return [a for a in natural[:2] if a in keep] + extras + [a for a in natural[2:] if a in keep]


def git_log(s: Session) -> str:
    """``git log --shortstat --oneline -30`` of the task's module."""
    rng = s.rng
    nouns = sorted({n for ns in s.modules.values() for n in ns})
    return "\n".join(f"{rng.randrange(1, 9)} files changed, "
                     f"{rng.randrange(5, 300)} insertions(+), "
                     f"{rng.randrange(0, 120)} deletions(-)  {h:07x} "
                     f"{rng.choice(['fix', 'refactor', 'docs', 'test'])}: {s.module} "
                     f"{rng.choice(nouns)}"
                     for h in (rng.randrange(16**7) for _ in range(30)))


def patch(s: Session, test: bool) -> tuple[str, str]:
    """The agent's ``apply_patch`` call: the fix, or the regression test."""
    package, module, noun, kind = s.package, s.module, s.noun, s.kind
    if test:
        diff = (f"--- a/tests/test_{module}.py\n+++ b/tests/test_{module}.py\n"
                f"@@ -1,3 +1,12 @@\n+def test_{noun}_{kind}_regression(service):\n"
                f"+    \"\"\"The case from the task must keep working.\"\"\"\n"
                f"+    items = service.sample_{noun}s(3)\n"
                f"+    assert service.check_{kind}(items) == service.expected(items)\n")
        thought = "Adding a regression test for the exact case in the task."
    else:
        ln = s.rng.randrange(20, 200)
        diff = (f"--- a/{package}/{module}.py\n+++ b/{package}/{module}.py\n"
                f"@@ -{ln},7 +{ln},8 @@\n     def check_{kind}(self, items):\n"
                f"-        return self._apply(items)\n"
                f"+        # {FAILURES[kind][1]}: see the task ({kind})\n"
                f"+        return self._apply(self._prepare_{noun}s(items))\n")
        thought = (f"The {kind} problem comes from check_{kind} passing the raw "
                   f"{noun}s through; I'll prepare them first.")
    return call("apply_patch", thought, diff=diff), "Patch applied cleanly.\n" + diff


def act(s: Session, action: str, idx: int, reads_left: int) -> tuple[str, str]:
    """Round ``idx`` of the plan: the assistant's reply and the tool's observation."""
    package, module = s.package, s.module
    if action == "read_main":
        return (call("read_file", f"Reading {module}.py in full before changing anything.",
                     path=f"{package}/{module}.py"),
                numbered(fill(s.files[module], s.others, s.files,
                              max(s.budget(reads_left), 1500))))
    if action == "read_other":
        m = s.others[idx % len(s.others)]
        return (call("read_file", f"{module}.py calls into {m}.py; checking how {m} "
                                  f"treats a {s.noun} there.", path=f"{package}/{m}.py"),
                numbered(fill(s.files[m], s.others, s.files, s.budget(reads_left))))
    if action == "shell":
        return (call("run_shell", f"Checking recent history of {module}.py for related "
                                  "changes.",
                     command=f"git log --shortstat --oneline -30 -- {package}/{module}.py"),
                git_log(s))
    if action == "run_fail":
        return (call("run_tests", "Let me reproduce the failure first.",
                     target=f"tests/test_{module}.py"), test_log(s, passed=False))
    if action in ("patch", "patch_test"):
        return patch(s, test=action == "patch_test")
    return call("run_tests", "Running the tests again.", target="tests"), test_log(s, True)


def conversation(i: int, task: Task) -> dict[str, object]:
    """Conversation i of the shipped file, on ``task``."""
    s = start(i, task)
    explore(s)
    plan = action_plan(5 + (i * 7) % 16)  # 5..20 rounds
    for idx, action in enumerate(plan):
        reads_left = sum(1 for a in plan[idx:] if a in ("read_main", "read_other"))
        s.step(*act(s, action, idx, reads_left))
    test_note = (" and a regression test covers the case from the task" if "patch_test" in plan
                 else "; the existing tests cover the case from the task")
    s.say("assistant",
          f"Done. The {s.kind} problem in `{s.package}/{s.module}.py` is fixed: check_{s.kind} "
          f"now prepares the {s.noun}s before applying them{test_note}."
          + (" The full test suite passes." if "run_pass" in plan else
             " I did not run the full suite; please run it before merging."))
    return {"id": f"agentic-{i:03d}", "domain": "agentic", "source": "specgrid-agentic",
            "project": task[0], "tools": TOOLS, "messages": s.messages}


def main() -> None:
    with OUT.open("w") as f:
        for i, task in enumerate(TASKS):
            f.write(json.dumps(conversation(i, task), separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
