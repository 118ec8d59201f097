"""What a twin fits, each factor bounded to its physical range: the roofline's efficiency
factors and overheads (engines/sim/roofline.py ``Efficiency``) and the drafter's acceptance,
per prompt domain, per draft position where the cells' counters give positions, else one
scale of the starting chain. A parameter vector ``x`` maps to a ``Setup`` (the forward model's
inputs) and to the profile data a twin file stores, through the same functions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from engines.sim.calibrate import BOUNDS
from engines.sim.twin.analytic import Setup
from engines.sim.twin.cells import Observed

EFFICIENCY = ("bandwidth", "compute", "pass_overhead_ms", "request_overhead_ms")
"""Fitted on every twin: they set every forward pass, and each request's time outside the
engine's steps."""
LINEAR = ("request_overhead_ms",)
"""Efficiency factors fitted on a linear scale (the rest on a log scale)."""
SPECULATIVE = ("spec_step_overhead_ms", "spec_token_overhead_us")
"""Fitted when the cells hold speculative ones."""
FIXED = ("draft_pass_overhead_ms", "eager_layer_overhead_us")
"""Kept from the starting profile: no closed-loop cell separates them from the fitted ones
(a draft pass's fixed cost is paid steps times per step, like the step overhead; the eager
launch cost only past the CUDA-graph batch sizes)."""
P_BOUNDS = (0.01, 0.99)
"""A draft position's conditional acceptance: a probability."""
MAX_P = 0.999
"""The simulator's cap on any position's acceptance (engines/sim/model.py acceptance_probs)."""


@dataclass(frozen=True)
class Factor:
    name: str
    """``bandwidth`` ..., ``accept_scale:<domain>``, ``accept_p<i>:<domain>``."""
    lo: float
    hi: float
    log: bool
    """Fitted on a log scale (factors spanning orders of magnitude)."""

    def encode(self, value: float) -> float:
        value = min(max(value, self.lo), self.hi)
        return math.log(value) if self.log else value

    def decode(self, x: float) -> float:
        return math.exp(x) if self.log else x

    @property
    def bounds(self) -> tuple[float, float]:
        return (math.log(self.lo), math.log(self.hi)) if self.log else (self.lo, self.hi)


@dataclass(frozen=True)
class Space:
    """The fitted factors of one twin and the setup they start from."""

    start: Setup
    factors: tuple[Factor, ...]
    positions: int
    """Draft positions fitted one by one (0: one acceptance scale per domain)."""

    @classmethod
    def for_cells(cls, start: Setup, observed: Sequence[Observed],
                  bounds: Mapping[str, tuple[float, float]] = BOUNDS) -> Space:
        """The factors the cells can fit, within ``bounds`` (the node's ranges,
        document.py ``fit_bounds``)."""
        spec = [o for o in observed if o.speculative]
        names = list(EFFICIENCY) + (list(SPECULATIVE) if spec else [])
        # the request overhead is often nil (a simulator's own cells, an engine-side anchor):
        # fitted on a linear scale, whose range starts at 0
        factors = [Factor(n, *bounds[n], log=n not in LINEAR) for n in names]
        # the drafter's chain is fitted only where a cell's acceptance is not known already
        drafted = [o for o in spec if o.scenario.known_reach is None]
        domains = sorted({d for o in drafted for d, share in o.scenario.domains if share > 0})
        positions = max((len(o.per_position) for o in drafted if o.per_position), default=0)
        for d in domains:
            chain = start.acceptance.get(d) or start.acceptance["general"]
            if positions:
                factors += [Factor(f"accept_p{i + 1}:{d}", *P_BOUNDS, log=False)
                            for i in range(positions)]
            else:  # a scale on the starting chain, up to the simulator's cap
                factors.append(Factor(f"accept_scale:{d}", 0.05, MAX_P / max(chain),
                                      log=False))
        return cls(start, tuple(factors), positions)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.factors]

    def x0(self, setup: Setup | None = None) -> list[float]:
        """The vector of ``setup``'s values (default: the starting setup's)."""
        values = self.values_of(setup or self.start)
        return [f.encode(values[f.name]) for f in self.factors]

    def values_of(self, setup: Setup) -> dict[str, float]:
        """Each factor's value in ``setup`` (acceptance relative to the starting chain)."""
        eff = setup.efficiency
        out: dict[str, float] = {}
        for f in self.factors:
            if ":" not in f.name:
                out[f.name] = float(getattr(eff, f.name))
                continue
            kind, domain = f.name.split(":")
            chain = setup.acceptance.get(domain) or setup.acceptance["general"]
            base = self.start.acceptance.get(domain) or self.start.acceptance["general"]
            if kind == "accept_scale":
                out[f.name] = chain[0] / base[0]
            else:
                out[f.name] = chain[int(kind.removeprefix("accept_p")) - 1]
        return out

    def values(self, x: Sequence[float]) -> dict[str, float]:
        return {f.name: f.decode(v) for f, v in zip(self.factors, x, strict=True)}

    def setup(self, x: Sequence[float]) -> Setup:
        """The forward model's inputs at ``x``."""
        return apply(self.start, self.values(x), self.positions)


def scaled_chain(base: Sequence[float], scale: float) -> tuple[float, ...]:
    return tuple(min(MAX_P, p * scale) for p in base)


def fitted_chain(base: Sequence[float], ps: Sequence[float]) -> tuple[float, ...]:
    """Fitted positions, then the starting chain's later positions scaled like the last
    fitted one (they are not seen by the cells, only by longer drafts)."""
    if len(ps) >= len(base):
        return tuple(ps)
    ratio = ps[-1] / base[len(ps) - 1] if base[len(ps) - 1] else 1.0
    return tuple(ps) + scaled_chain(base[len(ps):], ratio)


def apply(start: Setup, values: Mapping[str, float], positions: int) -> Setup:
    """``start`` with fitted factor values (``Space.values``)."""
    eff = {k: v for k, v in values.items() if ":" not in k}
    table = dict(start.acceptance)
    domains = {k.split(":")[1] for k in values if ":" in k}
    for d in sorted(domains):
        base = start.acceptance.get(d) or start.acceptance["general"]
        if positions:
            ps = [values[f"accept_p{i + 1}:{d}"] for i in range(positions)]
            table[d] = fitted_chain(base, ps)
        else:
            table[d] = scaled_chain(base, values[f"accept_scale:{d}"])
    return replace(start.with_efficiency(**eff), acceptance=table)


def profile_data(setup: Setup) -> dict[str, Any]:
    """The fitted parts of a setup as profile fields: ``efficiency`` (hardware profile) and
    ``acceptance`` (model profile)."""
    return {"efficiency": {k: float(v) for k, v in asdict(setup.efficiency).items()},
            "acceptance": {d: [float(p) for p in chain] for d, chain in setup.acceptance.items()}}
