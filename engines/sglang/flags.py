"""SGLang ServerArgs field names -> command-line flags.

Contract used by grid (owned by engines/sglang): `server_args_to_argv(args, version)` turns a
mapping of ServerArgs field names to values into full flag names (never prefixes). The same
flags drive the simulator, which accepts SGLang's flag names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flag_name(field: str) -> str:
    """`speculative_num_steps` -> `--speculative-num-steps`."""
    return "--" + field.replace("_", "-")


def server_args_to_argv(args: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Flags for `args` in a stable order. `True` is a bare switch, `False`/`None` are omitted."""
    argv: list[str] = []
    for field in sorted(args):
        value = args[field]
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag_name(field))
        elif isinstance(value, list | tuple):
            argv.append(flag_name(field))
            argv.extend(str(v) for v in value)
        else:
            argv.extend([flag_name(field), str(value)])
    return argv
