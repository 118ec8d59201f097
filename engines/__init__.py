"""What a server is, behind one interface (engines/base.py), one folder per kind: `sim` (the
simulated SGLang server), `sglang`, `vllm`, `external` (a URL someone else runs); an engine
whose numbers are modelled (the simulator) has a second one (engines/modelling.py). Imports
neither grid nor actors: a server program knows no orchestrator."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.base import Engine
    from engines.modelling import Modeller


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


def modeller(name: object) -> Modeller | None:
    """The model of the engine called `name`, for an engine whose numbers are modelled:
    `engines/<name>/modeller.py`'s MODELLER (engines/modelling.py). None for an engine whose
    numbers are measured, and for a name engines/ has no folder for (an older run's cell)."""
    return _modeller(name) if isinstance(name, str) and name in names() else None


@cache
def _modeller(name: str) -> Modeller | None:
    if importlib.util.find_spec(f"engines.{name}.modeller") is None:
        return None
    found: Modeller = importlib.import_module(f"engines.{name}.modeller").MODELLER
    return found


def twin_modeller() -> Modeller:
    """The model that fits twins and predicts from them (docs/twin.md): the one of an engine
    under engines/ that models its numbers (the simulator's). The driver asks for it by what it
    does, not by its name. ValueError when engines/ holds none."""
    for name in names():
        if (found := modeller(name)) is not None:
            return found
    raise ValueError("no engine under engines/ fits twins")
