"""Where a cell stands against the calibrated envelope of its hardware x model pair
(engines/sim/profile.py `Envelope`), computed here once from plain values (engines/planning.py
`Scenario`): the plan asks it of a cell's config, the report of what the cell recorded, and
both get the same reasons for the same values.

What is checked: the concurrency (an open-loop cell whose running batch is not known: the
batch its rate implies by Little's law, rate x output tokens x the modelled batch-1 decode step
x time_scale, capped by max_running_requests and max_in_flight), the output tokens, the
shortest and longest prompt, for a speculative cell its EAGLE-3 shape, the adaptive switches
(a threshold, a depth by batch, the engine's own adaptation) and its prompts' domains. A
conversation cell is always outside: no anchor replays multi-turn contexts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.planning import EnvelopeFinding, Scenario
from engines.sim.model import PerfModel
from engines.sim.options import profile_for

SHAPE_ARGS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
"""The variant args that make an EAGLE-3 shape (steps, topk, draft tokens)."""


def envelope(options: Mapping[str, Any], scenario: Scenario) -> EnvelopeFinding:
    """The reasons `scenario` lies outside the envelope of the profile `options` name (none:
    inside), and what the envelope covers. ValueError when the profile cannot be read."""
    profile = profile_for(options)
    env = profile.envelope
    if env is None:
        pair = f"{profile.hardware_data.get('name')} / {profile.model_data.get('name')}"
        return EnvelopeFinding((f"no anchor covers {pair} (docs/simulator.md 'Calibrated "
                                "envelope')",), "no calibrated envelope")
    args = scenario.args
    reasons: list[str] = []
    concurrency = scenario.concurrency
    if concurrency is None and scenario.rate is not None:
        roofline, _ = profile.roofline(scenario.tp_size, dict(scenario.env), dict(args))
        scale = options.get("time_scale")
        implied = (scenario.rate * int(scenario.output_tokens or 1)
                   * PerfModel(roofline).decode_s(1) * (1.0 if scale is None else float(scale)))
        caps = [c for c in (args.get("max_running_requests"), scenario.max_in_flight) if c]
        concurrency = round(max(1.0, min([implied, *map(float, caps)])), 1)
    if scenario.conversations:
        reasons.append("multi-turn conversation replay (no anchor covers growing contexts)")
    shape: tuple[int, int, int] | None = None
    algorithm = str(args.get("speculative_algorithm") or "").upper()
    if algorithm == "NONE":  # SGLang's spelling of no speculation
        algorithm = ""
    if algorithm:
        parts = [args.get(k) for k in SHAPE_ARGS]
        if algorithm not in env.algorithms or None in parts:
            auto = " with SGLang's automatic shape" if algorithm in env.algorithms else ""
            reasons.append(f"speculative algorithm {algorithm}{auto} (the anchor measured "
                           f"{'/'.join(env.algorithms)} with explicit shapes)")
        else:
            shape = (int(parts[0]), int(parts[1]), int(parts[2]))  # type: ignore[arg-type]
        switches = (("speculative_disable_above_batch",
                     scenario.disable_above_batch is not None),
                    ("speculative_depth", scenario.depth_schedule),
                    ("speculative_adaptive", scenario.adaptive))
        reasons += [f"{key} (no anchor measured the adaptive switch)"
                    for key, given in switches if given]
    reasons += env.outside(concurrency=concurrency, output_tokens=scenario.output_tokens,
                           prompt_tokens=scenario.prompt_tokens, speculative=shape,
                           domains=scenario.domains if algorithm else ())
    return EnvelopeFinding(tuple(reasons), env.describe())
