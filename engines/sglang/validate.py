"""Check SGLang command lines with SGLang's own argument parser, before any server starts.

The parser runs in a SUBPROCESS of a Python that has SGLang installed (a separate venv, built by
`scripts/validate_sglang_venv.sh`; on a GPU node, the engine's own Python), so the orchestrator's
venv never needs SGLang, and SGLang's ~2-4 s import happens once for a whole batch of command
lines (JSON in on stdin, JSON out on stdout).

Per command line, in that subprocess:
    p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p); ns = p.parse_args(argv)
    ServerArgs.from_cli_args(ns)       # only where construction is pure, see below
- argparse errors (unknown flag, ambiguous prefix, bad choice, bad int) exit with status 2;
  the message argparse writes to stderr is captured and the flag it names is reported.
- `from_cli_args` is called only when `ServerArgs` has `resolve_once` (SGLang >= 0.5.19): there
  `__post_init__` does nothing and all resolution (model config download, GPU probing) waits
  for `resolve_once()`, which is NEVER called here. In older versions (0.5.13, 0.5.14, ...)
  `__post_init__` itself resolves, reading the model's config from the hub and probing the
  device, which fails or is wrong on a CPU machine, so validation stops after `parse_args`
  (the result says `constructed: false`).
- The launcher's own flags are not ServerArgs: `sglang serve`'s `--model-type X` is dropped
  before parsing; the program head (`sglang serve`, `python -m sglang.launch_server`) is cut off
  by `server_flags`.

Nothing here needs a GPU or the network (HF_HUB_OFFLINE=1 is set for the subprocess).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_PROBE = "import sglang; print(sglang.__version__)"

_CHECKER = r"""
import argparse, contextlib, io, json, sys
req = json.load(sys.stdin)
import sglang
from sglang.srt.server_args import ServerArgs
construct = hasattr(ServerArgs, "resolve_once")
out = {"version": sglang.__version__, "constructed": construct, "results": []}
for argv in req["argvs"]:
    res = {"ok": True, "stage": None, "message": ""}
    p = argparse.ArgumentParser(prog="sglang")
    ServerArgs.add_cli_args(p)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = p.parse_args(argv)
    except SystemExit as e:
        lines = [l for l in err.getvalue().splitlines() if l.strip()]
        res = {"ok": False, "stage": "parse",
               "message": (lines[-1] if lines else f"argparse exit {e.code}")}
    except Exception as e:
        res = {"ok": False, "stage": "parse", "message": f"{type(e).__name__}: {e}"}
    else:
        if construct:
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    ServerArgs.from_cli_args(ns)
            except Exception as e:
                res = {"ok": False, "stage": "construct",
                       "message": f"{type(e).__name__}: {e}"}
    out["results"].append(res)
sys.stdout.write("\n@@SPECGRID@@" + json.dumps(out) + "\n")
"""

_LAUNCHER_ONLY = ("--model-type",)
_FLAG = re.compile(r"--[A-Za-z0-9][\w-]*")


class ValidationUnavailable(RuntimeError):
    """The given Python cannot run SGLang's parser (no SGLang, or the checker crashed)."""


@dataclass(frozen=True)
class FlagProblem:
    """One command line that SGLang's parser rejected."""

    label: str
    """Which command line (the caller's label, e.g. the variant name)."""
    flag: str | None
    """The flag the error names (e.g. `--speculative-num-stepz`), if any."""
    message: str
    """SGLang's/argparse's own message."""
    stage: str = "parse"
    """`parse` (argparse) or `construct` (ServerArgs.from_cli_args)."""

    def __str__(self) -> str:
        return f"{self.label}: {self.flag or '(no flag named)'}: {self.message}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
    return env


def sglang_available(python: str, timeout_s: float = 120.0) -> str | None:
    """SGLang's version importable by `python` (an interpreter path), or None if it has none
    (or `python` does not run)."""
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True,
                              timeout=timeout_s, env=_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def server_flags(argv: Sequence[str]) -> list[str]:
    """The ServerArgs part of a full command line: from the first `--flag` on, with the
    launcher-only `--model-type X` removed."""
    argv = list(argv)
    start = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    out: list[str] = []
    rest = iter(argv[start:])
    for arg in rest:
        if arg in _LAUNCHER_ONLY:
            next(rest, None)
        elif arg.split("=", 1)[0] in _LAUNCHER_ONLY and "=" in arg:
            continue
        else:
            out.append(arg)
    return out


def named_flag(message: str) -> str | None:
    """The first `--flag` an argparse/SGLang message names."""
    m = _FLAG.search(message)
    return m.group(0) if m else None


def check_batch(
    argvs: Mapping[str, Sequence[str]], python: str = sys.executable, timeout_s: float = 300.0
) -> tuple[str, bool, list[FlagProblem]]:
    """Parse every labelled argv in ONE subprocess of `python`. Returns (SGLang version,
    whether ServerArgs was constructed too, problems). Raises ValidationUnavailable."""
    labels = list(argvs)
    request = json.dumps({"argvs": [server_flags(argvs[k]) for k in labels]})
    try:
        proc = subprocess.run([python, "-c", _CHECKER], input=request, capture_output=True,
                              text=True, timeout=timeout_s, env=_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValidationUnavailable(f"cannot run SGLang's parser with {python}: {e}") from e
    marker = proc.stdout.rfind("@@SPECGRID@@")
    if proc.returncode != 0 or marker < 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ValidationUnavailable(
            f"SGLang's parser did not run with {python} (exit {proc.returncode}): {tail}")
    out = json.loads(proc.stdout[marker + len("@@SPECGRID@@"):])
    problems = [
        FlagProblem(label=label, flag=named_flag(res["message"]), message=res["message"],
                    stage=res["stage"] or "parse")
        for label, res in zip(labels, out["results"], strict=True)
        if not res["ok"]
    ]
    return out["version"], bool(out["constructed"]), problems


def validate_argv(
    argv_flags: Mapping[str, Sequence[str]] | Sequence[str],
    python: str = sys.executable,
    *,
    label: str = "",
    timeout_s: float = 300.0,
) -> list[FlagProblem]:
    """Problems SGLang's own parser finds in one command line (`label` names it) or in a
    mapping label -> command line (all in one subprocess). A command line may be the full
    LaunchSpec argv or just its flags (`server_flags` cuts the program head). Empty list =
    all accepted. Raises ValidationUnavailable if `python` cannot run SGLang's parser."""
    if isinstance(argv_flags, Mapping):
        batch = {str(k): list(v) for k, v in argv_flags.items()}
    else:
        batch = {label: list(argv_flags)}
    return check_batch(batch, python, timeout_s)[2]
