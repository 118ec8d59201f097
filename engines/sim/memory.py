"""Does a model fit its GPUs? SGLang sizes its KV pool at start-up from what
`--mem-fraction-static` of each GPU's memory leaves after the weights, and refuses to start
when nothing is left ("Not enough memory"); the simulator does the same from its profiles
(the model's weights, the hardware's memory: engines/sim/roofline.py `kv_capacity_tokens`),
and the plan asks the same question before anything starts. Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engines.sim.profile import Profile
from engines.sim.roofline import Roofline

DEFAULT_MEM_FRACTION_STATIC = 0.88
"""When neither the flag nor the profile's server section gives one (engines/sim/cli.py)."""
GIB = 2**30


@dataclass(frozen=True)
class MemoryFit:
    """The memory of one GPU of a server: what the weights take, what the KV pool gets."""

    hardware: str
    memory_gib: float
    mem_fraction_static: float
    tp: int
    weights_gib: float
    """Per GPU, the draft head included."""
    kv_tokens: int
    """Tokens the KV pool holds (0: the weights leave no room)."""
    fitting_tp: int | None
    """The smallest tp (1, 2, 4, 8) whose KV pool holds a token (None: none does)."""

    @property
    def budget_gib(self) -> float:
        return self.memory_gib * self.mem_fraction_static

    def problem(self) -> str | None:
        """One line when the server cannot start (SGLang's refusal, with the numbers)."""
        if self.kv_tokens > 0:
            return None
        ways = []
        if self.fitting_tp is not None and self.fitting_tp > self.tp:
            ways.append(f"from tp_size {self.fitting_tp}")
        if self.weights_gib < self.memory_gib:  # a larger share of the GPU would hold them
            ways.append(f"with mem_fraction_static above "
                        f"{math.ceil(self.weights_gib / self.memory_gib * 100) / 100:g}")
        hint = (f"it fits {' or '.join(ways)}" if ways
                else "use a GPU with more memory or a smaller model")
        return (f"Not enough memory: the weights ({self.weights_gib:.1f} GiB per GPU at "
                f"tp_size {self.tp}) leave no room for the KV cache on {self.hardware} "
                f"({self.memory_gib:g} GiB x mem_fraction_static {self.mem_fraction_static:g} "
                f"= {self.budget_gib:.1f} GiB per GPU); {hint}")


def mem_fraction(profile: Profile, given: float | None) -> float:
    """The mem_fraction_static a server runs with: the flag's, else the profile's default."""
    if given is not None:
        return float(given)
    return float(profile.server.get("mem_fraction_static", DEFAULT_MEM_FRACTION_STATIC))


def memory_fit(profile: Profile, tp_size: int, mem_fraction_static: float | None) -> MemoryFit:
    """The fit of `profile`'s model on its hardware at `--tp-size tp_size` (a model profile
    with `node_tp` stands for that many GPUs, as in `Profile.roofline`)."""
    model, hardware = profile.model_spec, profile.hardware
    fraction = mem_fraction(profile, mem_fraction_static)

    def roofline(tp: int) -> Roofline:
        return Roofline(hardware, model, tp=model.node_tp or max(1, tp))

    here = roofline(tp_size)
    fitting = next((tp for tp in (1, 2, 4, 8)
                    if roofline(tp).kv_capacity_tokens(fraction) > 0), None)
    return MemoryFit(hardware=hardware.name, memory_gib=hardware.memory_gib,
                     mem_fraction_static=fraction, tp=here.tp,
                     weights_gib=here.weight_bytes_per_gpu() / GIB,
                     kv_tokens=here.kv_capacity_tokens(fraction), fitting_tp=fitting)
