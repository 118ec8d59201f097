"""Checking command lines with an engine's OWN argument parser, before any server starts.

The parser runs in a subprocess of a Python that has the engine installed (a separate venv on
a machine without GPUs, CI included; on a GPU node, the engine's own Python), so the driver's
venv never needs the engine, and the engine's slow import happens once for a whole batch of
command lines: JSON `{"argvs": [...]}` in on stdin, one JSON line after the `MARKER` out.
Each engine's checker (engines/<name>/validate.py) sets `VERSION` (the engine's), `CONSTRUCTED`
(whether it goes past parsing) and `parse(argv)`, plus `construct(parsed)` when CONSTRUCTED;
`_FRAME` runs them and answers per command line
`{"ok": bool, "stage": "parse" | "construct" | null, "message": str}`: an argparse exit is
reported by the last line argparse wrote to stderr, any other error by its type and message.

Nothing here needs a GPU or the network (HF_HUB_OFFLINE=1 for the subprocess).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MARKER = "@@SPECGRID@@"
"""What the checker prints before its JSON line (engines log to stdout on import)."""

_FLAG = re.compile(r"--[A-Za-z0-9][\w-]*")

_FRAME = r"""
import contextlib, io, json, sys
req = json.load(sys.stdin)
{checker}
out = {{"version": VERSION, "constructed": CONSTRUCTED, "results": []}}
for argv in req["argvs"]:
    res = {{"ok": True, "stage": None, "message": ""}}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = parse(argv)
    except SystemExit as e:
        lines = [l for l in err.getvalue().splitlines() if l.strip()]
        res = {{"ok": False, "stage": "parse",
               "message": (lines[-1] if lines else f"argparse exit {{e.code}}")}}
    except Exception as e:
        res = {{"ok": False, "stage": "parse", "message": f"{{type(e).__name__}}: {{e}}"}}
    else:
        if CONSTRUCTED:
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    construct(parsed)
            except Exception as e:
                res = {{"ok": False, "stage": "construct",
                       "message": f"{{type(e).__name__}}: {{e}}"}}
    out["results"].append(res)
sys.stdout.write("\n" + {marker!r} + json.dumps(out) + "\n")
"""


class FlagError(ValueError):
    """A variant setting that an engine cannot spell for the version at hand (or a variant it
    cannot build at all). The message names the field and the version and is shown as it is."""

    def __init__(self, message: str, *, field: str | None = None, version: str | None = None):
        super().__init__(message)
        self.field = field
        self.version = version


class ValidationUnavailable(RuntimeError):
    """The given Python cannot run the engine's parser (not installed, or the checker
    crashed)."""


@dataclass(frozen=True)
class FlagProblem:
    """One command line that the engine's parser rejected."""

    label: str
    """Which command line (the caller's label, e.g. the variant name)."""
    flag: str | None
    """The flag the error names (e.g. `--speculative-num-stepz`), if any."""
    message: str
    """The engine's/argparse's own message."""
    stage: str = "parse"
    """`parse` (argparse) or `construct` (the engine's config object built from it)."""

    def __str__(self) -> str:
        return f"{self.label}: {self.flag or '(no flag named)'}: {self.message}"


def offline_env() -> dict[str, str]:
    """The environment of a checker or probe subprocess: offline, no warnings on stdout."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
    return env


def named_flag(message: str) -> str | None:
    """The first `--flag` an argparse or engine message names."""
    m = _FLAG.search(message)
    return m.group(0) if m else None


def flags_from(argv: Sequence[str]) -> list[str]:
    """A full command line from its first `--flag` on: the program head cut off."""
    argv = list(argv)
    return argv[next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv)):]


def installed_version(python: str, module: str, timeout_s: float = 120.0) -> str | None:
    """`module.__version__` as imported by `python` (an interpreter path), or None if it has
    no such module (or `python` does not run)."""
    try:
        proc = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                              capture_output=True, text=True, timeout=timeout_s,
                              env=offline_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def run_checker(checker: str, argvs: Mapping[str, Sequence[str]], python: str, engine: str,
                timeout_s: float = 300.0) -> tuple[str, bool, list[FlagProblem]]:
    """Run `checker` (Python source, see the module doc) with `python` over every labelled flag
    list in one subprocess. Returns (engine version, whether it went past parsing, problems).
    Raises ValidationUnavailable."""
    labels = list(argvs)
    request = json.dumps({"argvs": [list(argvs[k]) for k in labels]})
    try:
        proc = subprocess.run([python, "-c", _FRAME.format(checker=checker, marker=MARKER)],
                              input=request, capture_output=True, text=True,
                              timeout=timeout_s, env=offline_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValidationUnavailable(f"cannot run {engine}'s parser with {python}: {e}") from e
    marker = proc.stdout.rfind(MARKER)
    if proc.returncode != 0 or marker < 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ValidationUnavailable(
            f"{engine}'s parser did not run with {python} (exit {proc.returncode}): {tail}")
    out = json.loads(proc.stdout[marker + len(MARKER):])
    problems = [
        FlagProblem(label=label, flag=named_flag(res["message"]), message=res["message"],
                    stage=res["stage"] or "parse")
        for label, res in zip(labels, out["results"], strict=True)
        if not res["ok"]
    ]
    return out["version"], bool(out["constructed"]), problems
