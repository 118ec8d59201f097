"""SGLang ServerArgs field names -> command-line flags, for a given SGLang version.

Contract used by grid (owned by engines/sglang): `server_args_to_argv(args, version)` turns a
mapping of ServerArgs field names to values into full flag names (never prefixes: SGLang's
argparse accepts unambiguous prefixes, and a prefix that was unambiguous in one version is
ambiguous in the next). The same flags drive the simulator, which accepts SGLang's flag names.

Values: `True` is a bare switch; `False` and `None` are omitted (SGLang's switches default to
off); a list or tuple becomes `--flag v1 v2 ...`; a mapping becomes one JSON argument; anything
else is `str(value)`.

Version handling (`normalize_args`; facts in `engines.sglang.versions`), `version=None` means
unknown and emits the fields exactly as given:

- `cuda_graph_max_bs` and `cuda_graph_max_bs_decode` are one setting (the largest batch size
  captured for decode CUDA graphs; from 0.5.14 the old flag is an alias storing into the new
  field). Either spelling is accepted and emitted as `--cuda-graph-max-bs` before 0.5.14 and
  `--cuda-graph-max-bs-decode` from 0.5.14 on (the canonical name there: no deprecation
  warning in 0.5.14-0.5.19, and the old flag is gone from 0.5.20). Same for `cuda_graph_bs`
  and `cuda_graph_bs_decode`. Giving both spellings with different values is a FlagError.
- `enable_flashinfer_allreduce_fusion: true` is emitted as-is before 0.5.14 and as
  `--flashinfer-allreduce-fusion-backend auto` from 0.5.14 (what SGLang itself turns the
  deprecated switch into). With an explicit backend too, the backend wins. Conversely
  `flashinfer_allreduce_fusion_backend: auto` before 0.5.14 maps back to the switch; any other
  backend there is a FlagError (no such choice existed).
- Any other field whose flag does not exist in the version (see `versions.FLAG_SPANS`) is a
  FlagError naming the field and the version. Fields the table does not know are passed
  through; `engines.sglang.validate` checks them against the real parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import Version

from engines.sglang.versions import FLAG_SPANS, V0_5_14, parse_version, release
from engines.validation import FlagError

__all__ = [
    "flag_name",
    "normalize_args",
    "server_args_to_argv",
    "LEADING_FIELDS",
]

LEADING_FIELDS: tuple[str, ...] = (
    "model_path",
    "served_model_name",
    "tp_size",
    "base_gpu_id",
    "host",
    "max_running_requests",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
"""Fields emitted first, in this order, so that a command line reads well; the rest follow
sorted by name. The order is stable: the same args give the same argv."""

_RENAMED_PAIRS: tuple[tuple[str, str], ...] = (
    ("cuda_graph_max_bs", "cuda_graph_max_bs_decode"),
    ("cuda_graph_bs", "cuda_graph_bs_decode"),
)
_FUSION_SWITCH = "enable_flashinfer_allreduce_fusion"
_FUSION_BACKEND = "flashinfer_allreduce_fusion_backend"


def flag_name(field: str) -> str:
    """`speculative_num_steps` -> `--speculative-num-steps`."""
    return "--" + field.replace("_", "-")


def _merge_pair(out: dict[str, Any], old: str, new: str, version: Version, text: str) -> None:
    has_old, has_new = out.get(old) is not None, out.get(new) is not None
    if not (has_old or has_new):
        out.pop(old, None)
        out.pop(new, None)
        return
    if has_old and has_new and _plain(out[old]) != _plain(out[new]):
        raise FlagError(
            f"{old}={out[old]!r} and {new}={out[new]!r} are the same SGLang setting "
            f"(SGLang {text}); give only one",
            field=new,
            version=text,
        )
    value = out.pop(new) if has_new else out.pop(old)
    out.pop(old, None)
    out[new if version >= V0_5_14 else old] = value


def _merge_fusion(out: dict[str, Any], version: Version, text: str) -> None:
    switch = out.pop(_FUSION_SWITCH, None)
    backend = out.pop(_FUSION_BACKEND, None)
    if version >= V0_5_14:
        if backend is not None:
            out[_FUSION_BACKEND] = backend
        elif switch:
            out[_FUSION_BACKEND] = "auto"
        return
    if backend is None:
        if switch:
            out[_FUSION_SWITCH] = True
        return
    if backend != "auto":
        raise FlagError(
            f"{_FUSION_BACKEND}={backend!r}: SGLang {text} has no "
            f"{flag_name(_FUSION_BACKEND)} (added in 0.5.14); before that only the "
            f"'auto' behaviour exists, as {_FUSION_SWITCH}: true",
            field=_FUSION_BACKEND,
            version=text,
        )
    out[_FUSION_SWITCH] = True


def normalize_args(args: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """`args` with field names chosen for `version` (see the module docstring); `None` and
    `False` values are kept (they emit nothing). Raises FlagError for a field whose flag does
    not exist in `version`. `version=None` returns the fields as given."""
    out = {str(k): v for k, v in args.items()}
    parsed = parse_version(version)
    if parsed is None:
        return out
    v, text = release(parsed), str(version)
    for old, new in _RENAMED_PAIRS:
        _merge_pair(out, old, new, v, text)
    _merge_fusion(out, v, text)
    for field, value in out.items():
        span = FLAG_SPANS.get(field)
        if value is None or value is False or span is None or span.exists_in(v):
            continue
        since = f"added in {span.since}" if span.since and v < span.since else (
            f"removed after {span.until}")
        hint = f"; use {span.replacement}" if span.replacement else ""
        raise FlagError(
            f"{field}: SGLang {text} has no {flag_name(field)} ({since}){hint}",
            field=field,
            version=text,
        )
    return out


def _plain(value: Any) -> Any:
    """Plain JSON-able Python for mappings/sequences (OmegaConf containers included)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def _ordered(fields: list[str]) -> list[str]:
    lead = [f for f in LEADING_FIELDS if f in fields]
    return lead + sorted(f for f in fields if f not in LEADING_FIELDS)


def server_args_to_argv(args: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Flags for `args` as `version` spells them, in a stable order (LEADING_FIELDS first,
    then by name). `True` is a bare switch, `False`/`None` are omitted. Raises FlagError for a
    field the version lacks (see the module docstring); `version=None` emits as given."""
    normalized = normalize_args(args, version)
    argv: list[str] = []
    for field in _ordered(list(normalized)):
        value = normalized[field]
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag_name(field))
        elif isinstance(value, Mapping):
            argv.extend([flag_name(field), json.dumps(_plain(value), sort_keys=True)])
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            argv.append(flag_name(field))
            argv.extend(str(v) for v in value)
        else:
            argv.extend([flag_name(field), str(value)])
    return argv
