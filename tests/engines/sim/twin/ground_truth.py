"""The generating profile of the twin's ground-truth tests, read from its files: cells are made
by the simulator's closed-form model of h200 / llama3.1-8b, and a fit starts from the default
profile (rtx-pro-6000 / kimi-k2.5-class factors and chains)."""

from __future__ import annotations

import json

from engines.sim.profile import HARDWARE_DIR, MODEL_DIR, load_profile
from engines.sim.twin.analytic import Setup
from engines.sim.twin.document import starting_setup

GENERATING = json.loads((HARDWARE_DIR / "h100.json").read_text())["efficiency"]
"""h200.json takes h100's fitted factors (its efficiency_from): bandwidth 0.9103, compute
0.7423, pass_overhead_ms 1.0, spec_step_overhead_ms 2.7721, spec_token_overhead_us 17.1678."""
CHAINS = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())["acceptance"]
"""llama3.1-8b's drafter: coding 0.84, 0.82, 0.81, ...; general 0.8, 0.78, 0.77, ..."""
ACCEPT_CODING = 1 + 0.84 + 0.84 * 0.82 + 0.84 * 0.82 * 0.81
"""Tokens per verify of a chain of 3 on the coding chain: 1 + p1 + p1 p2 + p1 p2 p3 = 3.086728."""
ACCEPT_GENERAL = 1 + 0.8 + 0.8 * 0.78 + 0.8 * 0.78 * 0.77
"""The same on the general (chat) chain: 2.90448."""
EFFICIENCY = ("bandwidth", "compute", "pass_overhead_ms", "spec_step_overhead_ms",
              "spec_token_overhead_us")


def truth() -> Setup:
    return Setup.from_profile(load_profile("default", "h200", "llama3.1-8b"))


def start() -> Setup:
    return starting_setup("h200", "llama3.1-8b", "default")[1]
