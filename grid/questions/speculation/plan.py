"""The speculation question's plan (grid/questions/speculation): its space from `grid.search`,
the point of each cell, the earlier run or the profile it is given."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from engines.forced import forced_acceptance
from grid.analysis.surface import Profile, read_profile
from grid.plan.cells import Cell
from grid.plan.search import BASELINE, SearchError, search_space, with_settings
from grid.plan.specs import launch_spec
from grid.questions import TRACE_FILE
from grid.questions.speculation.confirm import switch_loads, switch_point
from grid.questions.speculation.read import rate_index, run_profile
from grid.questions.speculation.steps import OWN, Point, SurfaceSpace, rung

STEPS_KEY = "variant.args.speculative_num_steps"
RATES_KEY = "variant.forced_acceptance.rates"
SWITCH_KEY = "variant.speculative_disable_above_batch"
DRAFT_KEY = "variant.args.speculative_draft_model_path"


def point_of(cell: Cell, space: SurfaceSpace) -> Point:
    """A universe cell's point (load, depth, rate index)."""
    variant = cell.config["variant"]
    load = int(cell.concurrency or 0)
    if variant["name"] == BASELINE:
        return (load, 0, 0)
    depth = int(variant["args"]["speculative_num_steps"])
    if variant.get(SWITCH_KEY.removeprefix("variant.")) is not None:
        return switch_point(load, depth, int(variant[SWITCH_KEY.removeprefix("variant.")]))
    forced = forced_acceptance(variant.get("forced_acceptance"), variant["args"])
    draft = variant["args"].get("speculative_draft_model_path")
    if forced is None and draft is not None and str(draft) in space.drafters:
        return (load, depth, rung(space.drafters.index(str(draft))))
    if forced is None:
        return (load, depth, OWN)
    rate = rate_index(forced.mean_length, depth, space.rates)
    assert rate is not None, f"{cell.describe()}: forced to no rate of {space.rates}"
    return (load, depth, rate)


def takes_rates(template: Cell) -> bool:
    """Whether the variant's engine forces per-position rates (the simulator, vLLM), or a mean
    length only (SGLang): its own refusal of a forced chain decides."""
    probe = with_settings(template, {STEPS_KEY: 1, RATES_KEY: [0.5]})
    try:
        launch_spec(probe.config, template.engine_version)
    except ValueError:
        return False
    return True


def takes_zero(template: Cell) -> bool:
    """Whether the variant's engine runs depth 0, speculation configured with no drafts (SGLang
    and the simulator do; vLLM refuses zero speculative tokens): its own refusal decides."""
    try:
        launch_spec(with_settings(template, {STEPS_KEY: 0}).config, template.engine_version)
    except ValueError:
        return False
    return True


def switch_settings(template: Cell, lattice: tuple[int, ...], depth: int
                    ) -> dict[int, list[dict[str, Any]]]:
    """Load -> the settings of the threshold's confirmation there (the variant at `depth` with
    speculative_disable_above_batch = T, for every T whose confirmation measures that load,
    confirm.py `switch_loads`) that the variant's engine takes: its own refusal decides."""
    out: dict[int, list[dict[str, Any]]] = {}
    for threshold in lattice:
        setting = {STEPS_KEY: depth, SWITCH_KEY: threshold}
        try:
            launch_spec(with_settings(template, setting).config, template.engine_version)
        except ValueError:
            continue
        for b in switch_loads(threshold, lattice):
            out.setdefault(b, []).append(setting)
    return out


def surface_space(cfg: DictConfig) -> SurfaceSpace:
    """The lattice, depths, rates and budget; SearchError (one line) for depths that are not
    [0, d1, ...] ascending with one speculative depth or more, rates outside (0, 1], drafters
    that are not distinct paths."""
    s = cfg.grid.search
    base = search_space(cfg)
    depths = OmegaConf.to_container(s.depths, resolve=True)
    rates = OmegaConf.to_container(s.rates, resolve=True)
    drafters = OmegaConf.to_container(s.drafters, resolve=True)
    if (not isinstance(drafters, list) or len(set(map(str, drafters))) != len(drafters)
            or not all(isinstance(d, str) and d for d in drafters)):
        raise SearchError("grid.search.drafters must be distinct draft model paths (other "
                          f"drafters of the same cost per pass), got {drafters}")
    if (not isinstance(depths, list) or len(depths) < 2 or depths[0] != 0
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in depths)
            or depths != sorted(set(depths))):
        raise SearchError("grid.search.depths must be ascending whole depths from 0 (the "
                          "baseline) with one speculative depth or more, e.g. [0, 1, 2, 3, 4, "
                          f"5, 6, 7]; got {depths}")
    if (not isinstance(rates, list) or not rates
            or not all(isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1
                       for r in rates) or len(set(rates)) != len(rates)):
        raise SearchError("grid.search.rates must be distinct forced acceptance rates in "
                          f"(0, 1] (the surface's first, the length check's after); got {rates}")
    if not isinstance(s.forced, bool):
        raise SearchError(f"grid.search.forced must be true or false, got {s.forced}")
    return SurfaceSpace(base.lattice, base.coarse, tuple(depths[1:]),
                        tuple(float(r) for r in rates), base.max_cells, float(s.min_effect),
                        s.profile is None and s.surface is None, s.forced,
                        drafters=tuple(drafters))


def earlier_run(path: str) -> tuple[Path, dict[str, Any]]:
    """An earlier surface search's folder and its trace; SearchError (one line) otherwise."""
    folder = Path(path).expanduser().resolve()
    try:
        trace = json.loads((folder / TRACE_FILE).read_text())
    except (OSError, ValueError):
        trace = None
    if (not isinstance(trace, dict) or trace.get("kind") != "speculation"
            or not isinstance(trace.get("forced"), bool)
            or not isinstance(trace.get("zero"), bool)):
        raise SearchError(f"grid.search.surface={path}: not a speculation run folder (no "
                          f"{TRACE_FILE} of kind speculation)")
    return folder, trace


def given_profile(path: str | None) -> Profile | None:
    """grid.search.profile read: a profile file, or a run folder (its drafter's own cells);
    SearchError (one line) for neither."""
    if path is None:
        return None
    folder = Path(path).expanduser()
    try:
        found = run_profile(folder) if folder.is_dir() else read_profile(folder)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SearchError(f"grid.search.profile={path}: {e}") from None
    if found is None:
        raise SearchError(f"grid.search.profile={path}: the run has no done, unforced "
                          "speculative cell with acceptance recorded: no profile")
    return found


def planned_space(cfg: DictConfig) -> SurfaceSpace:
    """This run's space; from an earlier surface (grid.search.surface), that run's lattice,
    depths and rates (what its cells were measured at)."""
    space = surface_space(cfg)
    if cfg.grid.search.surface is None:
        return space
    _, trace = earlier_run(str(cfg.grid.search.surface))
    return dataclasses.replace(space, lattice=tuple(trace["lattice"]),
                               coarse=tuple(trace["coarse"]), depths=tuple(trace["depths"]),
                               rates=tuple(trace["rates"]), profile=False,
                               forced=trace["forced"], zero=trace["zero"])


