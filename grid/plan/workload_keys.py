"""Which workload keys each workload kind reads, so that a key no workload of the grid reads is
an error instead of silently ignored (`workload.kind=prompts workload.conversations=x`;
docs/checks.md). A key counts as set when its value differs from WorkloadConfig's default:
every composed workload carries every key, and the shipped workload files repeat some defaults
(`template: llama3`), which must not count."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from grid.plan.config import ConfigError, WorkloadConfig

KIND_KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("prompts", "domains", "train_data", "holdout", "mix", "num_prompts",
                "sample_seed", "input_tokens", "input_shaping"),
    "conversations": ("conversations", "format", "template", "replay", "max_turns",
                      "num_conversations", "think_time", "think_time_s", "time_scale"),
}
"""Workload kind -> the keys only that kind reads."""


def _defaults() -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(WorkloadConfig):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


DEFAULTS = _defaults()


def check_workload_keys(workloads: Iterable[Mapping[str, Any]]) -> None:
    """ConfigError (one line, naming the key) for a workload key that is set but read by no
    workload of the grid (`workloads`: every cell's composed workload section)."""
    workloads = list(workloads)
    kinds = {str(w.get("kind") or "prompts") for w in workloads}
    for w in workloads:
        for kind, keys in KIND_KEYS.items():
            if kind in kinds:
                continue
            for key in keys:
                if key in w and w[key] != DEFAULTS[key]:
                    raise ConfigError(
                        f"workload.{key}={w[key]!r} is read only by workload.kind={kind}, but "
                        f"workload {w.get('name')!r} is kind={w.get('kind') or 'prompts'}: "
                        f"drop workload.{key} (or set workload.kind={kind})")
