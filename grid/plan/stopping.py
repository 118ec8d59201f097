"""A cell's early stop as the plan sees it: the precision target (`load.target`), its cap
(`load.max_requests`) and the over-saturation stop, checked before anything starts and shown
in the plan. The stop itself happens in the load generator (actors/loadgen/stopping.py). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grid.plan.config import ConfigError
from specgrid_metrics.precision import Target, parse_targets


def targets_of(load: Mapping[str, Any]) -> tuple[Target, ...]:
    """The cell's precision targets (ConfigError, one line, for a bad one)."""
    try:
        return parse_targets(load.get("target"))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def check_stopping(config: Mapping[str, Any], combo: Mapping[str, Any]) -> None:
    """Everything about the early stop that cannot be meant, as one line."""
    load = config["load"]
    where = f" (cell {dict(combo)})" if combo else ""
    targets = targets_of(load)
    cap = load.get("max_requests")
    if not targets:
        if cap is not None:
            raise ConfigError(f"load.max_requests={cap} is the cap of a precision target: set "
                              f"load.target too, or load.num_requests for a fixed count{where}")
        return
    if load.get("num_requests") is not None:
        raise ConfigError("load.num_requests fixes a cell's count; with load.target set "
                          f"load.max_requests for its cap instead{where}")
    if cap is not None and int(cap) < int(load["min_requests"]):
        raise ConfigError(f"load.max_requests={cap} is below load.min_requests="
                          f"{load['min_requests']}: the cap must allow the requests checked "
                          f"before the first precision check{where}")
    if config["workload"].get("kind") == "conversations":
        raise ConfigError("load.target applies to prompt workloads: a conversation cell "
                          f"replays its conversations whole (workload.kind=conversations){where}")


def describe_stop(load: Mapping[str, Any], num_requests: int) -> str:
    """The plan's words for a cell's count: `requests=32`, or with a target `requests<=128
    until output_tok_s ±5 % (first check after 8)`; `duration_s` and the over-saturation stop
    when set."""
    targets = targets_of(load)
    if not targets:
        text = f"requests={num_requests}"
    else:
        text = (f"requests<={num_requests} until " + " and ".join(t.describe() for t in targets)
                + f" (first check after {load['min_requests']})")
    if load.get("duration_s") is not None:
        text += f", at most {load['duration_s']:g} s"
    if not load.get("stop_over_saturated", True):
        text += ", over-saturation not stopped"
    return text
