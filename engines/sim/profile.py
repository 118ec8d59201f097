"""Simulator profiles: the calibration of the performance model, in one JSON file each.

``--sim-profile NAME`` loads ``engines/sim/profiles/NAME.json``; ``--sim-profile PATH`` loads a
file. The JSON is the single documented place for every constant; this docstring says where the
default profile's numbers come from.

Calibration of ``default`` (SIMULATION -- a model of a published measurement, not a measurement)
----------------------------------------------------------------------------------------------
Source: the single-node measurement quoted in docs/architecture.md -- one 8-GPU node, SGLang,
baseline vs EAGLE-3 (3 steps, topk 1, 4 draft tokens) on prompts from the drafter's training
distribution:

=========================  ============  ===========
scenario                   baseline      EAGLE-3
=========================  ============  ===========
single stream              89 tok/s      96.1 tok/s
saturated                  773 tok/s     354 tok/s
=========================  ============  ===========

Scenario definitions (``calibration.scenario`` in the JSON; the HTTP calibration test measures
exactly these through the API with a wall clock):

- prompts: coding, 128 prompt tokens (512 characters), temperature 0, ``ignore_eos``, 256 output
  tokens each.
- single stream: 2 requests one after the other; tok/s = output tokens / wall time (TTFT
  included).
- saturated: 64 requests sent at once (64 concurrent streams); tok/s = output tokens / wall time
  from the first send to the last byte. ``--max-running-requests`` is *not* set: the baseline runs
  all 64 (default 1024), EAGLE-3 runs 48 (SGLang's silent cap) and queues 16 -- as the published
  comparison most likely ran, and the reason the design tells users to set it explicitly.

Fitted constants (``calibration.fitted``): ``decode_base_ms`` and ``decode_per_token_ms`` from the
two baseline numbers, then ``spec_overhead_base_ms`` and ``verify_token_cost_ratio`` from the two
EAGLE-3 numbers, with acceptance fixed by the table below. ``python -m engines.sim.calibrate``
re-fits them by running the same scheduler offline (no clock) and prints the table.

Assumed, not measured: the per-domain acceptance tables (coding/agentic in the drafter's mix:
~2.9 accepted tokens per 4-token verify; encyclopedic off-mix: ~1.9), prefill costs, draft-model
costs, the all-reduce share of a forward pass (20 %), and the environment multipliers.

Environment and flags modelled (``hardware.comm_multipliers``; they scale the all-reduce share)
---------------------------------------------------------------------------------------------
- ``NCCL_ALGO``: Ring 1.0, Tree 0.93, NVLS 0.85, NVLSTree 0.88 (a list takes its best entry).
- ``NCCL_PROTO``: LL 0.95, LL128 0.97, Simple 1.25.
- ``NCCL_P2P_LEVEL=LOC`` or ``NCCL_P2P_DISABLE=1``: 1.8 (all-reduce through host memory).
- ``NCCL_NVLS_ENABLE=1`` / ``--enable-nccl-nvls``: 0.92 (SGLang defaults NVLS off).
- ``--enable-flashinfer-allreduce-fusion`` / ``--flashinfer-allreduce-fusion-backend X``: 0.8.
- ``--disable-custom-all-reduce``: 1.15.
- ``CUDA_DEVICE_MAX_CONNECTIONS``: recorded, no effect -- SGLang overwrites it with 8.
Speculation-related (engines/sim/scheduler.py): ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1``
skips the draft extend at adaptive steps=0 (cheaper) but the next drafted steps of a request run
with cold draft KV (acceptance x ``cold_draft_factor`` for ``cold_draft_steps`` steps);
``SGLANG_SIMULATE_ACC_LEN=x`` forces a mean accept length x (SGLang's own test knob);
``--disable-cuda-graph`` raises the per-step base cost and disables batch padding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.sim.model import StepCosts

PROFILE_DIR = Path(__file__).parent / "profiles"

_REQUIRED = ("name", "step_costs", "hardware", "acceptance", "algorithms", "sampling", "server")


@dataclass(frozen=True)
class Profile:
    """A loaded profile: the raw JSON plus typed accessors used by the server."""

    data: Mapping[str, Any]
    path: Path

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def costs(self) -> StepCosts:
        return StepCosts.from_mapping(self.data["step_costs"])

    @property
    def hardware(self) -> Mapping[str, Any]:
        return self.data["hardware"]

    @property
    def acceptance(self) -> Mapping[str, list[float]]:
        return self.data["acceptance"]

    @property
    def sampling(self) -> Mapping[str, Any]:
        return self.data["sampling"]

    @property
    def server(self) -> Mapping[str, Any]:
        return self.data["server"]

    @property
    def model(self) -> Mapping[str, Any]:
        return self.data.get("model", {})

    def algorithm(self, name: str) -> Mapping[str, float]:
        """Acceptance and draft-cost factors for a speculative algorithm (``*`` = fallback)."""
        algos = self.data["algorithms"]
        fallback = algos.get("*", {"accept_scale": 1.0, "draft_cost_scale": 1.0})
        return algos.get(name.upper(), fallback)

    def summary(self) -> dict[str, Any]:
        """What /server_info shows about the profile."""
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.data.get("description", ""),
            "sources": self.data.get("sources", {}),
            "calibration": self.data.get("calibration", {}),
        }


def resolve_profile_path(name_or_path: str) -> Path:
    """``default`` -> the packaged profiles/default.json; anything with a separator or ending in
    .json is a file path."""
    if name_or_path.endswith(".json") or "/" in name_or_path:
        return Path(name_or_path)
    return PROFILE_DIR / f"{name_or_path}.json"


def load_profile(name_or_path: str = "default") -> Profile:
    """Load and check a profile; ValueError with the reason when it is unusable."""
    path = resolve_profile_path(name_or_path)
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.json"))
        raise ValueError(f"simulator profile {name_or_path!r} not found ({path}); known: {known}")
    data = json.loads(path.read_text())
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"simulator profile {path} lacks {missing}")
    if "general" not in data["acceptance"]:
        raise ValueError(f"simulator profile {path}: acceptance needs a 'general' entry")
    StepCosts.from_mapping(data["step_costs"])  # raises TypeError on missing constants
    return Profile(data=data, path=path.resolve())
