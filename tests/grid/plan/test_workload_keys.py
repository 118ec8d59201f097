"""A workload key that no workload of the grid reads is an error naming it, and no shipped
workload or sweep sets one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from grid.cli.flags import CONFIG_NAME
from grid.plan.cells import axis_overrides, expand_axes
from grid.plan.config import ConfigError, register_configs
from grid.plan.workload_keys import KIND_KEYS, check_workload_keys
from grid.questions import schema_keys
from grid.run import CONF_DIR
from tests.grid.plan.bad_input import assert_bad_input


@pytest.mark.parametrize(("overrides", "message"), [
    (["workload.kind=prompts", "workload.conversations=agentic.jsonl"],
     "workload.conversations='agentic.jsonl' is read only by workload.kind=conversations, but "
     "workload 'coding' is kind=prompts"),
    (["workload.max_turns=3"], "workload.max_turns=3 is read only by workload.kind=conversations"),
    (["grid.axes.workload=[agentic_conversations]", "workload.input_tokens=[10,100]"],
     "workload.input_tokens=[10, 100] is read only by workload.kind=prompts, but workload "
     "'agentic_conversations' is kind=conversations"),
])
def test_a_key_the_workload_kind_does_not_read_is_one_line(overrides, message, tmp_path, capsys):
    assert_bad_input(["+sweep=smoke", *overrides], message, tmp_path / "results", capsys)


def test_a_mixed_grid_may_set_a_key_for_its_workloads_of_one_kind():
    coding = {"name": "coding", "kind": "prompts", "max_turns": 3}
    talks = {"name": "talks", "kind": "conversations", "max_turns": 3}
    check_workload_keys([coding, talks])  # max_turns is read by the conversation cells
    with pytest.raises(ConfigError, match="workload.max_turns=3"):
        check_workload_keys([coding])


@contextmanager
def _configs() -> Iterator[None]:
    register_configs(schema_keys())
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR), job_name="t"):
        yield


def _workload(overrides: list[str]) -> dict[str, Any]:
    section = OmegaConf.to_container(compose(CONFIG_NAME, overrides).workload, resolve=True)
    assert isinstance(section, dict)
    return {str(k): v for k, v in section.items()}


def _sweep_workloads(sweep: str) -> Iterator[dict[str, Any]]:
    """The workload section of every cell of a shipped sweep, composed as the plan composes
    them (only the axes that touch the workload are varied: the rest cannot change it)."""
    grid = compose(CONFIG_NAME, [f"+sweep={sweep}"]).grid
    combos = expand_axes(OmegaConf.to_container(grid.axes) or {},
                         OmegaConf.to_container(grid.include) or [],
                         OmegaConf.to_container(grid.exclude) or [])
    seen: list[dict[str, Any]] = []
    for combo in combos or [{}]:
        mine = {k: v for k, v in combo.items() if str(k).startswith("workload")}
        if mine not in seen:
            seen.append(mine)
            yield _workload([f"+sweep={sweep}", *axis_overrides(mine)])


@pytest.mark.slow
def test_every_shipped_workload_and_sweep_composes_clean():
    kinds: set[str] = set()
    with _configs():
        for path in sorted((CONF_DIR / "workload").glob("*.yaml")):
            # train_matched asks for its training data on the command line (train_data: ???)
            extra = (["workload.train_data=/data/train.jsonl"] if path.stem == "train_matched"
                     else [])
            workload = _workload([f"workload={path.stem}", *extra])
            check_workload_keys([workload])
            kinds.add(workload["kind"])
        sweeps = sorted((CONF_DIR / "sweep").glob("*.yaml"))
        for path in sweeps:
            workloads = list(_sweep_workloads(path.stem))
            assert workloads, path.stem
            check_workload_keys(workloads)
            kinds.update(w["kind"] for w in workloads)
    assert len(sweeps) >= 10
    assert kinds == set(KIND_KEYS)  # both kinds were among those checked
