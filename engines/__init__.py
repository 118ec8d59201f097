"""What a server is, behind one interface (engines/base.py), one folder per kind: `sim` (the
simulated SGLang server), `sglang`, `vllm`, `external` (a URL someone else runs). Imports neither
grid nor actors: a server program knows no orchestrator."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.base import Engine


@cache
def get(name: str) -> Engine:
    """The engine called `name` (`engine=<name>`): `engines/<name>/engine.py`'s ENGINE.
    ValueError naming the engines there are when there is no such folder."""
    if name not in names():
        raise ValueError(f"no engine {name!r}: the engines are {', '.join(names())}")
    engine: Engine = importlib.import_module(f"engines.{name}.engine").ENGINE
    return engine


def find(name: object) -> Engine | None:
    """The engine called `name`, or None when engines/ has none by that name (a cell of an
    older run folder may name an engine that is gone)."""
    return get(name) if isinstance(name, str) and name in names() else None


@cache
def names() -> tuple[str, ...]:
    """Every engine folder under engines/ that has an engine.py."""
    return tuple(sorted(
        info.name for info in pkgutil.iter_modules(__path__)
        if info.ispkg and importlib.util.find_spec(f"engines.{info.name}.engine") is not None))


def modeller() -> Engine:
    """The engine with a model of servers: the one that fits twins and predicts from them
    (overrides `Engine.fit_twin`; the simulator). The driver asks it through this, by what it
    does, not by its name. ValueError when engines/ holds none."""
    from engines.base import Engine

    found = [get(n) for n in names() if type(get(n)).fit_twin is not Engine.fit_twin]
    if not found:
        raise ValueError("no engine under engines/ fits twins")
    return found[0]
