"""What a command line's overrides ask for, read with Hydra's own override parser: sweep syntax
defines grid axes, expanded inside one driver process; every other override applies to every
cell, and a fixed override of a key that is an axis of the grid is an error naming both
(docs/architecture.md). No Ray, no files: parsing only."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Quote, QuotedString, ValueType
from hydra.errors import HydraException

from grid.plan.cells import GROUP_AXES, KEY_ALIASES, axis_key
from grid.plan.config import ConfigError

AXIS_ROOTS = ("engine", "model", "variant", "workload", "load")
"""Config sections that change what a cell measures: the only keys a sweep can vary."""
NOT_RECORDED = ("run.id", "run.fresh", "results_dir", "plan")
"""Keys that name or preview a run folder rather than define its grid: left out of run.json."""
SECRET_KEYS = ("engine.api_key",)
"""Keys whose literal value is never written to run.json (an interpolation such as
`'${oc.env:SPECGRID_API_KEY}'` is): a resume gives the secret again."""
_SHORT_NAMES = {key: short for short, key in KEY_ALIASES.items()}


@dataclass
class CommandLine:
    """The overrides of one command line, split into fixed ones and grid axes."""

    fixed: list[str] = field(default_factory=list)
    """Overrides applied to every cell, as typed."""
    axes: dict[str, list[Any]] = field(default_factory=dict)
    """Axis name -> values, from sweep syntax, in command-line order."""
    fixed_keys: dict[str, str] = field(default_factory=dict)
    """Config key each fixed override sets -> the override as typed."""


def parse_overrides(overrides: Sequence[str],
                    group_options: Callable[[str, list[str]], list[str]] | None = None
                    ) -> CommandLine:
    """Split overrides into fixed ones and grid axes. `group_options(group, fixed)` lists a
    config group's options under the fixed overrides (which may add a config search path);
    needed only for `glob(...)` sweeps."""
    parsed = _parse(overrides)
    line = CommandLine()
    for text, override in zip(overrides, parsed, strict=True):
        if not override.is_sweep_override():
            line.fixed.append(_forced(text, override))
            line.fixed_keys[override.key_or_group] = text
    for text, override in zip(overrides, parsed, strict=True):
        if override.is_sweep_override():
            name = _axis_name(override, text)
            if name in line.axes:
                raise ConfigError(f"{text} sweeps {override.key_or_group} a second time on "
                                  "this command line")
            line.axes[name] = _sweep_values(override, text, line.fixed, group_options)
    return line


FORCED = ("grid.axes.", "grid.include", "grid.exclude")
"""Keys a fixed override sets whether or not the composed config has them: an axis a grid
from the command line (or a sweep without it) lacks, `grid.axes.repeat=[0,1,2]` as the
report's hint prints it, would otherwise be refused as not in the schema's struct."""


def _forced(text: str, override: Override) -> str:
    """`grid.axes.X=...` (or `+grid.axes.X=...`) as Hydra's force-add `++grid.axes.X=...`:
    set when the grid has the axis, added when it does not."""
    if not override.key_or_group.startswith(FORCED) or override.is_delete() \
            or override.is_force_add() or override.package:
        return text
    return "++" + text.lstrip("+")


def _parse(overrides: Sequence[str]) -> list[Override]:
    """Hydra's parse of each override; an unparsable one is a ConfigError quoting it."""
    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed.append(parser.parse_override(text))
        except HydraException as e:
            reason = str(e).strip().splitlines()
            detail = next((r for r in reason if not r.startswith("Error parsing override")),
                          "")
            raise ConfigError(f"cannot parse override {text!r}: {detail or reason[0]} "
                              "(see https://hydra.cc/docs/advanced/override_grammar/basic/)"
                              ) from None
    return parsed


def _axis_name(override: Override, text: str) -> str:
    key = override.key_or_group
    if override.is_delete():
        raise ConfigError(f"{text}: a deletion cannot be swept")
    if override.package:
        raise ConfigError(f"{text}: a sweep cannot name a package (@{override.package})")
    root = key.split(".", 1)[0]
    if root not in AXIS_ROOTS or ("." not in key and key not in GROUP_AXES):
        raise ConfigError(f"{text}: {key} cannot be a grid axis; sweeps vary "
                          f"{', '.join(GROUP_AXES)} (config groups) or keys under "
                          f"{', '.join(f'{r}.' for r in AXIS_ROOTS)}")
    return _SHORT_NAMES.get(key, key)


def _sweep_values(override: Override, text: str, fixed: list[str],
                  group_options: Callable[[str, list[str]], list[str]] | None) -> list[Any]:
    if override.value_type == ValueType.INTERVAL_SWEEP:
        raise ConfigError(f"{text}: interval() needs a sampling sweeper; list the values "
                          "(a,b,c) or use range(start,stop,step)")
    if override.value_type == ValueType.GLOB_CHOICE_SWEEP:
        if override.key_or_group not in GROUP_AXES or group_options is None:
            raise ConfigError(f"{text}: glob() selects options of a config group "
                              f"({', '.join(GROUP_AXES)})")
        glob = override.value()
        options = group_options(override.key_or_group, fixed)
        values: list[Any] = list(glob.filter(options))  # type: ignore[union-attr]
    else:
        values = [_plain(v) for v in override.sweep_iterator()]
    if not values:
        raise ConfigError(f"{text}: the sweep has no values")
    return values


def _plain(value: Any) -> Any:
    """A parsed value with Hydra's quoted strings turned into plain strings."""
    if isinstance(value, QuotedString):
        return value.text
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def merge_axes(config_axes: Mapping[str, Any], line: CommandLine,
               source: str = "the grid") -> dict[str, Any]:
    """The grid's axes: the composed config's (a sweep file, `grid.axes.X=[...]`) with the
    command line's sweeps. A command-line sweep of an existing axis replaces its values in
    place; a new one is appended. A fixed override of an axis key is a ConfigError naming
    both (`source` says where the config's axes come from, e.g. "sweep smoke")."""
    axes = dict(config_axes)
    by_key = {axis_key(name): name for name in axes}
    for new, values in line.axes.items():
        existing = by_key.get(axis_key(new))
        if existing is not None:
            axes[existing] = values
        else:
            axes[new] = values
            by_key[axis_key(new)] = new
    for key, text in line.fixed_keys.items():
        collides = by_key.get(key)
        if collides is not None:
            name = collides
            where = "the command line" if name in line.axes else source
            raise ConfigError(
                f"override {text} collides with axis {name}={list(axes[name])} of {where}; "
                f"sweep it instead ({key}=a,b) or drop the override")
    return axes


def recorded_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that define a run's grid (what `--resume` composes again): all but those
    that name or preview the folder (run.id, run.fresh, results_dir, plan)."""
    parsed = _parse(overrides)
    return [text for text, o in zip(overrides, parsed, strict=True)
            if o.key_or_group not in NOT_RECORDED
            and not (o.key_or_group in SECRET_KEYS and "${" not in text)]


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The config key or group each override sets."""
    return [o.key_or_group for o in _parse(overrides)]


def hydra_string(value: str) -> str:
    """A string as a quoted Hydra override value, escaped by Hydra's own rules."""
    return QuotedString(text=value, quote=Quote.single).with_quotes()
