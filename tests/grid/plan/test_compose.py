"""The plan composes once per choice of config groups and sets each cell's values on a copy
(grid/plan/compose.py): checked against Hydra's own compose of the same cell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from grid.cli.flags import CONFIG_NAME
from grid.plan.cells import expand_axes
from grid.plan.compose import split_overrides, with_values
from grid.plan.config import register_configs
from grid.questions import schema_keys
from grid.run import CONF_DIR

SWEEPS = [pytest.param(p.stem, marks=() if p.stem in ("smoke", "concurrency") else pytest.mark.slow)
          for p in sorted((CONF_DIR / "sweep").glob("*.yaml"))]
"""Every shipped sweep: the default sweep and the smoke one in the README's command, the rest
with the slow tests (~0.6 s each)."""


@pytest.fixture(scope="module")
def hydra_conf() -> Iterator[None]:
    register_configs(schema_keys())
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR), job_name="t"):
        yield


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_cell_is_the_same_config_as_hydras_compose_of_it(sweep, hydra_conf):
    fixed = [f"+sweep={sweep}"]
    base = compose(CONFIG_NAME, fixed)
    combos = expand_axes(OmegaConf.to_container(base.grid.axes) or {},
                         OmegaConf.to_container(base.grid.include),
                         OmegaConf.to_container(base.grid.exclude))
    # the last cell that sets a value axis (its last extra cell where it has grid.include)
    combo = next((c for c in reversed(combos) if split_overrides(c)[1]), combos[-1])
    groups, values = split_overrides(combo)
    fresh = compose(CONFIG_NAME, [*fixed, *groups, *values])
    once = with_values(compose(CONFIG_NAME, [*fixed, *groups]) if groups else base, values)
    assert (OmegaConf.to_container(once, resolve=True)
            == OmegaConf.to_container(fresh, resolve=True)), combo
    assert OmegaConf.is_struct(once) and OmegaConf.is_struct(fresh)


def test_a_bad_value_is_hydras_own_error(hydra_conf):
    values = ["++load.concurrency='eight'"]
    with pytest.raises(ConfigCompositionException) as fresh:
        compose(CONFIG_NAME, ["+sweep=smoke", *values])
    with pytest.raises(ConfigCompositionException) as once:
        with_values(compose(CONFIG_NAME, ["+sweep=smoke"]), values)
    assert str(once.value) == str(fresh.value)
    assert str(once.value) == "Error merging override ++load.concurrency='eight'"


def test_the_copy_leaves_the_composed_config_as_it_was(hydra_conf):
    base = compose(CONFIG_NAME, ["+sweep=smoke"])
    before = OmegaConf.to_container(base)
    cell = with_values(base, ["++load.concurrency=64"])
    assert cell.load.concurrency == 64 and OmegaConf.to_container(base) == before
