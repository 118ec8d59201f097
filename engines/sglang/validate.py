"""Check SGLang command lines with SGLang's own argument parser, before any server starts
(engines/validation.py runs the checker below in a subprocess of a Python with SGLang, built by
`scripts/validate_sglang_venv.sh` or `scripts/engine_envs.sh`; SGLang's ~2-4 s import happens
once for a whole batch of command lines).

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

import sys
from collections.abc import Mapping, Sequence

from engines.validation import (
    FlagProblem,
    ValidationUnavailable,
    flags_from,
    installed_version,
    named_flag,
    run_checker,
)

_CHECKER = r"""
import argparse
import sglang
from sglang.srt.server_args import ServerArgs
VERSION, CONSTRUCTED = sglang.__version__, hasattr(ServerArgs, "resolve_once")
def parse(argv):
    p = argparse.ArgumentParser(prog="sglang")
    ServerArgs.add_cli_args(p)
    return p.parse_args(argv)
construct = ServerArgs.from_cli_args
"""

_LAUNCHER_ONLY = ("--model-type",)


def sglang_available(python: str, timeout_s: float = 120.0) -> str | None:
    """SGLang's version importable by `python` (an interpreter path), or None if it has none
    (or `python` does not run)."""
    return installed_version(python, "sglang", timeout_s)


def server_flags(argv: Sequence[str]) -> list[str]:
    """The ServerArgs part of a full command line: from the first `--flag` on, with the
    launcher-only `--model-type X` removed."""
    out: list[str] = []
    rest = iter(flags_from(argv))
    for arg in rest:
        if arg in _LAUNCHER_ONLY:
            next(rest, None)
        elif arg.split("=", 1)[0] in _LAUNCHER_ONLY and "=" in arg:
            continue
        else:
            out.append(arg)
    return out


def check_batch(
    argvs: Mapping[str, Sequence[str]], python: str = sys.executable, timeout_s: float = 300.0
) -> tuple[str, bool, list[FlagProblem]]:
    """Parse every labelled argv in ONE subprocess of `python`. Returns (SGLang version,
    whether ServerArgs was constructed too, problems). Raises ValidationUnavailable."""
    flags = {label: server_flags(argv) for label, argv in argvs.items()}
    return run_checker(_CHECKER, flags, python, "SGLang", timeout_s)


__all__ = ["FlagProblem", "ValidationUnavailable", "check_batch", "named_flag",
           "server_flags", "sglang_available"]
