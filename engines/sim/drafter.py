"""The simulated drafter: a request's acceptance follows how close its prompt is to the drafter's
training data (or training mix), measured with the same alignment code the grid's plan uses
(workloads/alignment.py), so pointing the simulator at other training data changes acceptance.

- `--sim-drafter-train-data PATH`: the drafter's training data (any format workloads/loaders.py
  reads), subsampled deterministically to REFERENCE_ROWS rows at start-up.
- `--sim-drafter-train-mix JSON`: its training mix, `{"coding": 0.6, "agentic": 0.4}` (domains)
  or by data-set family (`{"magicoder": 0.3, ...}`); rows shipped in workloads/ stand for it.
- neither: DEFAULT_DRAFTER_MIX (workloads/records.py), a coding/agentic drafter like the one
  this project's default profile was calibrated against.

Per request: prompt alignment `a` in [0, 1] (workloads/alignment.py), then every position of the
acceptance chain is interpolated between the profile's off-distribution chain
(`acceptance.encyclopedic`: text the drafter never saw) and its in-distribution chain
(`acceptance.coding`: the drafter on its own data, the calibrated case) with weight
`clip((a - FLOOR_ALIGNMENT) / (FULL_ACCEPTANCE_AT - FLOOR_ALIGNMENT), 0, 1)`: a prompt at least as
aligned as FULL_ACCEPTANCE_AT (below the plan's ALIGNED_THRESHOLD, so every prompt of a workload
the plan calls aligned is at or near it) gets the calibrated acceptance; one at or below
FLOOR_ALIGNMENT (it shares only incidental words with the data) gets the floor. Cost: one sparse
vector product per distinct prompt (bench/workloads_throughput.py measures it), cached, so a
repeated prompt costs a dictionary lookup.

Context length (`ContextDecay`, from the model profile's `drafter` section): every position of
the chain is multiplied by f(L) = 1 up to the draft head's training length T, then
max(floor, 1 - slope x (L / T - 1)) for a context of L tokens; the form, the fitted numbers and
their source: docs/simulator.md "Acceptance and context length". Only algorithms whose profile
entry sets `context_decay` (EAGLE, EAGLE3: a separately trained short-sequence head) get it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.records import DEFAULT_DRAFTER_MIX, row_key

REFERENCE_ROWS = 1000
"""Training rows the simulated drafter compares prompts with (start-up time, per-prompt cost)."""
FULL_ACCEPTANCE_AT = 0.5
"""Prompt alignment from which the drafter accepts as on its own data."""
FLOOR_ALIGNMENT = 0.3
"""Prompt alignment at or below which the drafter accepts as on unrelated text."""
ON_DISTRIBUTION = "coding"
"""Profile acceptance chain of the drafter on its training distribution."""
OFF_DISTRIBUTION = "encyclopedic"
"""Profile acceptance chain on text unlike anything the drafter trained on."""
CACHE_PROMPTS = 4096
DEFAULT_CONTEXT_DECAY_SLOPE = 0.125
"""Share of the short-context acceptance lost per training length of extra context, when the
model profile gives none (fitted in docs/simulator.md, "Acceptance and context length")."""
DEFAULT_CONTEXT_FLOOR = 0.13
"""Share of the short-context acceptance kept at any context length, when the profile gives
none (same fit)."""


@dataclass(frozen=True)
class ContextDecay:
    """How the drafter's acceptance falls with context length (model profile, `drafter`)."""

    train_context_tokens: int
    """Longest sequence the draft head was trained on (`drafter.train_context_tokens`)."""
    slope: float = DEFAULT_CONTEXT_DECAY_SLOPE
    """`drafter.context_decay_slope`: share of the short-context acceptance lost per training
    length of extra context."""
    floor: float = DEFAULT_CONTEXT_FLOOR
    """`drafter.context_floor`: share of the short-context acceptance kept at any length."""

    @classmethod
    def from_profile(cls, drafter: Mapping[str, Any]) -> ContextDecay | None:
        """The model profile's `drafter` section -> its decay; None when it gives no training
        length (acceptance then does not depend on context length); ValueError when a value is
        out of range."""
        tokens = drafter.get("train_context_tokens")
        if tokens is None:
            return None
        decay = cls(int(tokens), float(drafter.get("context_decay_slope",
                                                   DEFAULT_CONTEXT_DECAY_SLOPE)),
                    float(drafter.get("context_floor", DEFAULT_CONTEXT_FLOOR)))
        if decay.train_context_tokens < 1 or decay.slope < 0 or not 0 <= decay.floor <= 1:
            raise ValueError(f"drafter: train_context_tokens must be >= 1, context_decay_slope "
                             f">= 0 and context_floor in [0, 1], got {decay}")
        return decay

    def factor(self, context_tokens: int) -> float:
        """Multiplier of every chain position for a request of ``context_tokens``: 1 up to the
        training length, then ``1 - slope x (L / T - 1)``, never below ``floor``."""
        if context_tokens <= self.train_context_tokens:
            return 1.0
        return max(self.floor, 1.0 - self.slope * (context_tokens / self.train_context_tokens
                                                   - 1.0))


def parse_mix(text: str | None) -> dict[str, float] | None:
    """`--sim-drafter-train-mix` JSON -> {key: weight}; ValueError naming the problem."""
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"--sim-drafter-train-mix is not JSON: {e}") from None
    if not isinstance(value, dict) or not value:
        raise ValueError("--sim-drafter-train-mix must be a JSON object {domain: weight}")
    out = {}
    for key, weight in value.items():
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise ValueError(f"--sim-drafter-train-mix: weight of {key!r} must be a number >= 0")
        out[str(key)] = float(weight)
    if not sum(out.values()) > 0:
        raise ValueError("--sim-drafter-train-mix: weights do not sum to a positive number")
    return out


class SimDrafter:
    """Prompt -> acceptance chain, from the prompt's alignment with the drafter's data."""

    def __init__(self, acceptance: Mapping[str, Sequence[float]], *,
                 train_data: str | None = None, train_mix: Mapping[str, float] | None = None,
                 context: ContextDecay | None = None):
        # Imported here: scikit-learn costs ~1 s of start-up that a baseline server never needs.
        from workloads.alignment import ReferenceIndex
        from workloads.reference import drafter_reference

        mix = None if train_data else dict(train_mix or DEFAULT_DRAFTER_MIX)
        ref = drafter_reference(train_data, mix, limit=REFERENCE_ROWS, mix_rows=REFERENCE_ROWS)
        self.index = ReferenceIndex.from_rows(ref.rows, ref.description)
        self.description = ref.description
        fallback = acceptance["general"]
        self.on = list(acceptance.get(ON_DISTRIBUTION) or fallback)
        self.off = list(acceptance.get(OFF_DISTRIBUTION) or fallback)
        while len(self.off) < len(self.on):
            self.off.append(self.off[-1] * 0.95)
        while len(self.on) < len(self.off):
            self.on.append(self.on[-1] * 0.95)
        self.context = context
        """Acceptance vs context length; None = independent of it."""
        self._cache: OrderedDict[str, float] = OrderedDict()

    @classmethod
    def from_sim_args(cls, sim: Mapping[str, Any], acceptance: Mapping[str, Sequence[float]],
                      context: ContextDecay | None = None) -> SimDrafter:
        return cls(acceptance, train_data=sim.get("drafter_train_data"),
                   train_mix=parse_mix(sim.get("drafter_train_mix")), context=context)

    def alignment(self, prompt_text: str) -> float:
        """The prompt's alignment in [0, 1] with the drafter's data (cached per prompt)."""
        key = row_key(prompt_text)
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        value = float(self.index.scale(np.array([self.index.similarity_one(prompt_text)]))[0])
        self._cache[key] = value
        if len(self._cache) > CACHE_PROMPTS:
            self._cache.popitem(last=False)
        return value

    def chain(self, prompt_text: str, context_tokens: int = 0) -> list[float]:
        """Per-position conditional acceptance for this prompt of ``context_tokens`` tokens
        (before algorithm, tree and temperature factors, which engines/sim/model.py
        acceptance_probs applies)."""
        span = FULL_ACCEPTANCE_AT - FLOOR_ALIGNMENT
        weight = min(1.0, max(0.0, (self.alignment(prompt_text) - FLOOR_ALIGNMENT) / span))
        scale = self.context.factor(context_tokens) if self.context else 1.0
        return [(off + (on - off) * weight) * scale
                for on, off in zip(self.on, self.off, strict=True)]

    def info(self) -> dict[str, Any]:
        """What /server_info shows about the drafter."""
        context = None if self.context is None else {
            "train_context_tokens": self.context.train_context_tokens,
            "context_decay_slope": self.context.slope, "context_floor": self.context.floor}
        return {"reference": self.description, "reference_rows": len(self.index),
                "typical_similarity": round(self.index.typical, 4), "context": context}
