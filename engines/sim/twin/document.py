"""A twin as a file: ``twin.json`` beside the run is a complete simulator profile (its node's
hardware and model profiles inline, with the fitted efficiency factors and acceptance chains,
the scheduler limits the server reported, and the twin's envelope as its calibrated one), plus a
``twin`` record: the run and cells it came from, every fitted factor with its interval, the fit
on every cell and the leave-one-load-out error. ``engine.options.profile=<path>`` serves it
(engines/sim/profile.py loads inline hardware and model profiles)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engines.sim.calibrate import BOUNDS
from engines.sim.profile import Profile, load_profile
from engines.sim.twin.analytic import Setup, predict
from engines.sim.twin.cells import Observed, envelope, observe
from engines.sim.twin.fit import bootstrap, factor_table, fit
from engines.sim.twin.holdout import goal, leave_one_load_out, repeat_spread, rows, split
from engines.sim.twin.node import (
    algorithm,
    node_data,
    node_profile,
    one_server_family,
    profile_of,
)
from engines.sim.twin.params import FIXED, Space, profile_data
from engines.twin_data import MeasuredCell

TWIN_VERSION = 1


def starting_setup(hardware: str, model: dict[str, Any] | str, start: str | None,
                   tp_size: int = 1) -> tuple[Profile, Setup]:
    """(the node's profile, the setup the fit starts from): the node's datasheet and model
    shapes (``model``: a shipped profile's name or one built from config.json, node.py) at
    ``tp_size`` GPUs with the factors of ``start`` (a profile name or path, or
    ``HARDWARE:MODEL``; None: the node's own pair) -- its efficiency, its drafter's chains and
    its server."""
    node = node_profile(hardware, model)
    setup = Setup.from_profile(node, tp_size)
    if start is None:
        return node, setup
    hw, sep, md = start.partition(":")
    other = Setup.from_profile(load_profile("default", hw, md) if sep else load_profile(start))
    return node, replace(setup.with_efficiency(**vars(other.efficiency)),
                         acceptance=other.acceptance, default_cap=other.default_cap,
                         speculative_cap=other.speculative_cap,
                         mem_fraction_static=other.mem_fraction_static)


def fit_bounds(node: Profile) -> dict[str, tuple[float, float]]:
    """The fitted factors' ranges on the node's hardware: the simulator's GPU ranges
    (engines/sim/calibrate.py BOUNDS), widened where the hardware profile says (``fit_bounds``:
    a CPU engine's host work per step spans far more)."""
    out = dict(BOUNDS)
    for name, pair in (node.hardware_data.get("fit_bounds") or {}).items():
        if name in out:
            lo, hi = (float(v) for v in pair)
            out[name] = (lo, hi)
    return out


def _reported(observed: Sequence[Observed], speculative: bool) -> int | None:
    """The running-batch cap the server chose itself (no --max-running-requests flag) for
    the baseline or the speculative cells, when every such cell reports the same one."""
    caps = {o.scenario.max_running for o in observed if o.speculative == speculative
            and "--max-running-requests" not in o.cell.server_command
            and "--max-num-seqs" not in o.cell.server_command}
    return caps.pop() if len(caps) == 1 and None not in caps else None


def scheduler(node: Profile, setup: Setup, observed: Sequence[Observed]) -> dict[str, Any]:
    """The scheduler limits the cells show (the servers' own /server_info), as the profile's
    server fields: default and speculative running-batch caps, and the memory fraction that
    holds the KV pool they reported."""
    out: dict[str, Any] = {}
    base, spec = _reported(observed, False), _reported(observed, True)
    if base:
        out["default_max_running_requests"] = base
    if spec:
        out["speculative_silent_cap"] = spec
    pools = [o.scenario.kv_pool for o in observed if o.scenario.kv_pool]
    if pools:
        rl = setup.roofline
        need = min(pools) * rl.model.kv_token_bytes / rl.kv_split + rl.weight_bytes_per_gpu()
        out["mem_fraction_static"] = min(0.99, max(0.05, need / (rl.hw.memory_gib * 2**30)))
    return out


def profile_json(node: Profile, setup: Setup, server: Mapping[str, Any], env: Mapping[str, Any],
                 run_id: str) -> dict[str, Any]:
    """The simulator profile of a fitted setup (module docstring)."""
    fitted = profile_data(setup)
    hw = copy.deepcopy(dict(node.hardware_data))
    hw.pop("efficiency_from", None)
    hw["efficiency"] = fitted["efficiency"]
    md = copy.deepcopy(dict(node.model_data))
    md.pop("efficiency_on", None)
    md.pop("anchor", None)
    md["acceptance"] = fitted["acceptance"]
    md["drafter"] = {**md.get("drafter", {}), "acceptance_by": "domain"}
    data = copy.deepcopy(dict(node.data))
    data.update(name=f"twin-{run_id}", hardware=hw, model=md,
                description=f"SIMULATION twin of run {run_id}: the simulator fitted to its "
                            "measured cells (docs/twin.md).",
                server={**data["server"], **server},
                calibration={"envelope": dict(env), "fitted_in": "twin.json (this file)"})
    data.pop("sources", None)
    return data


def build(cells: Sequence[MeasuredCell], *, run_id: str, hardware: str | None = None,
          model: str | None = None, start: str | None = None, seed: int = 0,
          replicates: int = 20, holdout: Sequence[int] = (),
          holdout_workloads: Sequence[str] = ()) -> dict[str, Any]:
    """The twin document of a run's cells (``Modeller.fit_twin``); ``holdout`` /
    ``holdout_workloads``: loads and workloads to hold out as a split of their own (holdout.py
    ``split``), besides leaving each load out."""
    observed = [observe(c) for c in cells]
    loads = sorted({o.load for o in observed})
    if not observed:
        raise ValueError("no done closed-loop cells to fit a twin to")
    if len(loads) < 2:
        raise ValueError(f"cells at one load only (c={loads[0]}): a twin needs two loads or "
                         "more to separate per-step costs from per-token ones")
    one_server_family(cells)
    hw, node_model = node_data(cells, hardware, model)
    md = node_model if isinstance(node_model, str) else str(node_model["name"])
    tps = sorted({o.tp_size for o in observed})
    if len(tps) > 1:
        raise ValueError(f"cells at tensor-parallel sizes {tps}: fit a twin to one at a time")
    node, start_setup = starting_setup(hw, node_model, start, tps[0])
    space = Space.for_cells(start_setup, observed, fit_bounds(node))
    bases = [o.cell.variant for o in observed if not o.speculative]
    baseline = "baseline" if "baseline" in bases else (bases[0] if bases else "baseline")
    held = split(space, observed, baseline, holdout, seed, holdout_workloads) \
        if holdout or holdout_workloads else None
    # With a split, the twin written is the one fitted without the held-out cells: whatever
    # it serves later (a forced curve beside the real one, a search's prior) is out of sample
    # there. Without one, every cell.
    train = [o for o in observed if not (o.load in holdout or o.cell.workload
                                         in holdout_workloads)]
    best = fit(space, train)
    reps = bootstrap(space, train, best, replicates, seed)
    drafting = sorted({a for a in map(algorithm, cells) if a}) or ["EAGLE3"]
    env = envelope(observed, run_id, hw, md, drafting)
    server = scheduler(node, best.setup, observed)
    data = profile_json(node, best.setup, server, env, run_id)
    # the closed form models every drafter with EAGLE3's factors (analytic.py Setup) and the
    # draft model's own size (node.py): the algorithms the cells drafted with get those
    # factors too, not the shipped profile's (STANDALONE's 4x draft cost stands for a draft
    # LLM next to an EAGLE head's size, which a twin knows from the draft's own config.json)
    for name in drafting:
        data["algorithms"][name] = copy.deepcopy(data["algorithms"]["EAGLE3"])
    # every figure below comes from the profile as written, so loading the file reproduces it
    written = Setup.from_profile(profile_of(data))
    fitted = rows(observed, [predict(written, o.scenario) for o in observed], baseline)
    data["twin"] = {
        "version": TWIN_VERSION, "run_id": run_id, "cells": [c.cell_id for c in cells],
        "fitted_on": sorted(o.cell.cell_id for o in train),
        "node": {"hardware": hw, "model": md}, "start": start or f"{hw}:{md}",
        "baseline": baseline, "seed": seed, "replicates": replicates,
        "factors": factor_table(space, best, reps),
        "fixed": {n: getattr(best.setup.efficiency, n) for n in FIXED},
        "scheduler": server, "envelope": env, "fit": fitted,
        "holdout": leave_one_load_out(space, observed, baseline, seed),
        "known_acceptance": sum(o.scenario.known_reach is not None for o in observed),
        "repeat_spread": repeat_spread(observed),
    }
    if held is not None:
        data["twin"]["holdout_split"] = held
    judged = (held or data["twin"]["holdout"])["metrics"]
    data["twin"]["goal"] = goal(judged, data["twin"]["repeat_spread"])
    return data
