"""A cell's config from the grid's: composed once per choice of config groups, its value axes
set on a copy. A Hydra compose reads and merges every YAML file again (~0.25 s a cell on a
laptop core), so composing every cell made the default sweep's 15 cells plan in 2.6 s and a
dense grid of 84 in ~20 s; this way the default sweep plans in 0.7 s."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from grid.plan.cells import GROUP_AXES, axis_overrides


def split_overrides(combo: Mapping[str, Any]) -> tuple[tuple[str, ...], list[str]]:
    """A combination's overrides: those that choose config groups (`variant=eagle3`), and
    those that set values (`++load.concurrency=8`)."""
    groups = axis_overrides({a: v for a, v in combo.items() if a in GROUP_AXES})
    values = axis_overrides({a: v for a, v in combo.items() if a not in GROUP_AXES})
    return tuple(groups), values


def with_values(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """A copy of `cfg` with value overrides applied by Hydra's own code for them
    (`ConfigLoaderImpl._apply_overrides_to_config`, what `compose` runs once the config groups
    are merged; private, so hydra-core is pinned to 1.3 and tests/grid/plan/test_compose.py
    compares the result with a fresh compose of every shipped sweep's cells). A cell's value
    overrides come after every other override, so the result is the cell's compose."""
    out = copy.deepcopy(cfg)
    ConfigLoaderImpl._apply_overrides_to_config(
        OverridesParser.create().parse_overrides(overrides), out)
    return out
