"""The simulator's own settings (`engine.options.<key>`): its `--sim-*` flags without the prefix
(engines/sim/cli.py `build_parser` adds one flag per option), checked before anything starts,
and the profile they name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engines.options import Option, OptionError, check_options
from engines.sim.drafter import parse_mix
from engines.sim.profile import (
    HARDWARE_DIR,
    MODEL_DIR,
    PROFILE_DIR,
    Profile,
    known,
    load_profile,
    resolve_profile_path,
)


def _below_one(value: float) -> None:
    """A jitter of 1 could draw a factor of 0 (a server without step cost)."""
    if value >= 1:
        raise ValueError(f"must be below 1, got {value:g}")


OPTIONS: dict[str, Option] = {
    "profile": Option("performance profile (engines/sim/profiles/) or a JSON path",
                      types=(str,)),
    "hardware": Option("hardware profile (engines/sim/profiles/hardware/NAME.json)",
                       types=(str,)),
    "model": Option("model profile (engines/sim/profiles/model/NAME.json)", types=(str,)),
    "seed": Option("seeds everything random", types=(int,)),
    "time_scale": Option("multiplies every modelled duration (0 = no step cost)",
                         range=">= 0"),
    "startup_seconds": Option("/health answers 503 this long, like SGLang while loading",
                              range=">= 0"),
    "crash_after_requests": Option("exit abruptly when request N+1 arrives", types=(int,),
                                   range=">= 0"),
    "hang_after_requests": Option("stop answering anything after N requests", types=(int,),
                                  range=">= 0"),
    "error_rate": Option("fraction of requests answered with HTTP 500", range="[0, 1]"),
    "malformed_rate": Option("fraction of streams with a broken SSE event", range="[0, 1]"),
    "lossy_rate": Option("fraction of prompts whose greedy output changes after their first "
                         "accepted draft (a deliberately lossy drafter)", range="[0, 1]"),
    "unforced_spec_cost_scale": Option("multiplies a drafting step's cost where the drafter's "
                                       "own acceptance runs, not under a forced acceptance (a "
                                       "forced surface made wrong on purpose)", range="> 0"),
    "speed_jitter": Option("each server start draws a speed factor uniformly in [1 - j, 1 + j] "
                           "that multiplies every modelled duration (0 = none)",
                           range="[0, 1]", parse=_below_one),
    "start_seed": Option("seeds the per-start draw (speed_jitter) with the seed; set by the "
                         "launcher for each start from its server and repeat, a value given "
                         "here holds for every start", types=(int,)),
    "drafter_train_data": Option("the drafter's training data (acceptance follows each "
                                 "prompt's closeness to it); set by the plan from "
                                 "model.drafter", types=(str,)),
    "drafter_train_mix": Option("the drafter's training mix as JSON; set by the plan from "
                                "model.drafter", types=(str,), parse=parse_mix),
}
"""Every `--sim-*` flag of `python -m engines.sim`, by its name without the prefix."""

_PROFILE_PARTS = (("profile", PROFILE_DIR), ("hardware", HARDWARE_DIR), ("model", MODEL_DIR))


def profile_for(options: Mapping[str, Any]) -> Profile:
    """The profile the options name (the default profile, with the hardware and model
    profiles named, else its own). ValueError with the reason when it cannot be used."""
    return load_profile(str(options.get("profile") or "default"), options.get("hardware"),
                        options.get("model"))


def _inline_parts(profile: Any) -> set[str]:
    """The parts (``hardware``, ``model``) a profile file carries inline rather than naming a
    shipped one (a twin's fitted node, docs/twin.md); empty when it is unreadable (loading it
    says why)."""
    if not profile:
        return set()
    path = resolve_profile_path(str(profile))
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return set()
    return {k for k in ("hardware", "model") if isinstance(data, dict)
            and isinstance(data.get(k), dict)}


def check(options: Mapping[str, Any]) -> None:
    """Every key a `--sim-*` flag, every value one it takes, and the profiles they name
    readable; OptionError naming the key otherwise."""
    check_options(OPTIONS, options, "sim")
    inline = _inline_parts(options.get("profile"))
    for key, folder in _PROFILE_PARTS:  # a missing file: the key that names it
        name = options.get(key)
        if key in inline:  # a twin's own node: load_profile checks the name matches
            continue
        if name and not resolve_profile_path(str(name), folder).is_file():
            what = "simulator profile" if key == "profile" else f"simulator {key} profile"
            raise OptionError(key, f"{key}: {what} {name!r} not found; known: "
                                   f"{', '.join(known(folder))}")
    try:
        profile_for(options)
    except ValueError as e:  # a file that is there but unusable
        raise OptionError("profile", f"profile: {e}") from None
