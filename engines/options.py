"""Engine-specific settings (`engine.options.<key>` in the config): each engine declares the
keys it takes (`Engine.options`, one `Option` each) and checks them before anything starts
(`Engine.check_options`), so an unknown key or a value that cannot be meant is one line naming
the key. Pure: plain values in, an OptionError or nothing out."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

NUMBER = (int, float)
"""The types of a numeric option (bool is refused although it is an int)."""


_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class OptionError(ValueError):
    """An engine option that cannot be used. The message is one line that starts with the
    option's key (the config prefixes `engine.options.`); `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def within(rule: str, value: float) -> bool:
    """Whether `value` passes `rule`: `> x`, `>= x` or `[lo, hi]` (both ends included); NaN
    never passes."""
    if math.isnan(value):
        return False
    if rule.startswith("["):
        low, high = (float(x) for x in rule[1:-1].split(","))
        return low <= value <= high
    op, bound = rule.split()
    return value > float(bound) if op == ">" else value >= float(bound)


def range_problem(key: str, rule: str, value: Any) -> str | None:
    """One line (`time_scale must be >= 0, got -1`) when `value` is not a number that passes
    `rule`, else None."""
    words = f"within {rule}" if rule.startswith("[") else rule
    if isinstance(value, bool) or not isinstance(value, NUMBER):
        return f"{key} must be a number {words}, got {value!r}"
    if not within(rule, float(value)):
        shown = int(value) if isinstance(value, float) and value.is_integer() else value
        return f"{key} must be {words}, got {shown}"
    return None


@dataclass(frozen=True)
class Option:
    """One setting an engine takes under `engine.options`. None (unset) always passes unless
    the option is `required`."""

    help: str
    """What it does, one line (docs/engines.md lists them)."""
    types: tuple[type, ...] = ()
    """The Python types a value may have (empty = any); bool is never taken for a number."""
    range: str | None = None
    """`> x`, `>= x` or `[lo, hi]` for a number (see `within`)."""
    choices: tuple[Any, ...] = ()
    """The values it may take (empty = any)."""
    required: bool = False
    """Whether the engine cannot run without it."""
    parse: Callable[[Any], Any] | None = None
    """A further check of the value (e.g. a URL's form); raises ValueError with the reason."""

    def check(self, key: str, value: Any) -> None:
        """OptionError (one line starting with `key`) when `value` is not one this option
        takes."""
        if value is None:
            if self.required:
                raise OptionError(key, f"{key} must be set: {self.help}")
            return
        if self.types and (not isinstance(value, self.types)
                           or (isinstance(value, bool) and bool not in self.types)):
            names = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in self.types)
            raise OptionError(key, f"{key} must be {names}, got {value!r}")
        if self.range is not None:
            problem = range_problem(key, self.range, value)
            if problem:
                raise OptionError(key, problem)
        if self.choices and value not in self.choices:
            raise OptionError(key, f"{key}={value!r} is not one of "
                                   f"{', '.join(map(str, self.choices))}")
        if self.parse is not None:
            try:
                self.parse(value)
            except ValueError as e:
                raise OptionError(key, f"{key}: {e}") from None


def check_options(declared: Mapping[str, Option], options: Mapping[str, Any],
                  engine: str) -> None:
    """Every key of `options` declared, every value taken by its Option, every required one
    set; OptionError for the first that is not (an unknown key names the keys there are)."""
    for key, value in options.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise OptionError(str(key), f"{key} is not an option of engine={engine} (its "
                                        f"options: {known}; drop it with ~engine.options.{key})")
        declared[key].check(str(key), value)
    for key, option in declared.items():
        if option.required and key not in options:
            option.check(key, None)
