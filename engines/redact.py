"""Secrets out of what is shown and recorded: environment values and command-line flags that
hold a token, a key or a password, the same for every engine (the plan's commands, a cell's
recorded command and environment, a server's /server_info)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_PATTERN = re.compile(r"TOKEN|KEY|PASSWORD|PASSWD|SECRET|CREDENTIAL|AUTH", re.I)
"""Environment names whose values are redacted in logs and provenance."""

SECRET_FLAGS: frozenset[str] = frozenset({"--api-key", "--admin-api-key", "--hf-token"})
"""Command-line flags whose value is redacted (SGLang's and vLLM's spellings are the same)."""

REDACTED = "***"


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the values of tokens, keys, passwords and secrets replaced by "***"."""
    return {k: (REDACTED if SECRET_PATTERN.search(k) else v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """`argv` with the values of SECRET_FLAGS (`--api-key X`, `--api-key=X`) replaced."""
    out: list[str] = []
    hide = False
    for arg in argv:
        if hide:
            out.append(REDACTED)
            hide = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide = True
        elif arg.split("=", 1)[0] in SECRET_FLAGS and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(arg)
    return out


def redact_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """ServerArgs-named settings (`api_key`, `speculative_num_draft_tokens`, ...) with the
    values of the fields whose flag is in SECRET_FLAGS replaced: a name pattern would hide
    `..._tokens` fields, which are no secret."""
    return {k: (REDACTED if f"--{str(k).replace('_', '-')}" in SECRET_FLAGS and v is not None
                else v) for k, v in args.items()}
