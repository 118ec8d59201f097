"""The engine interface: what every kind of inference server answers, behind one class.
`engines/<name>/engine.py` implements it for each kind (`sim`, `sglang`, `vllm`, `external`);
`engines.get(name)` finds it by that folder name, so adding an engine touches its folder and a
config file (`conf/engine/<name>.yaml`), nothing in `grid/`. Every answer is a pure function of
plain values (version detection and validation run a subprocess of the engine's own Python);
what each method answers and who asks: docs/engines.md. An engine whose numbers are modelled
answers more through engines/modelling.py (`engines.modeller(name)`). Variants speak one
vocabulary, SGLang's ServerArgs field names; an engine maps what it has an equivalent for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import engines
from engines.depth import DepthSetting
from engines.launch import Endpoints, LaunchSpec, ServerRequest
from engines.metrics import MetricNames
from engines.options import Option, check_options
from engines.validation import FlagProblem, ValidationUnavailable


class Engine:
    """One kind of inference server (module docstring). Subclasses set the class attributes
    and implement `launch_spec`; the rest has defaults for an engine without them."""

    name: ClassVar[str]
    """The config name (`engine=<name>`) and folder under engines/."""
    label: ClassVar[str]
    """How reports and provenance name it, e.g. `SGLang`."""
    launches: ClassVar[bool] = True
    """False for a server someone else runs (nothing to start, no GPUs to reserve)."""
    start_estimate_s: ClassVar[float] = 600.0
    """A server start on GPUs, for the plan's estimate (a real model load takes minutes)."""
    cpu_start_estimate_s: ClassVar[float] = 60.0
    """A server start on the CPU (tiny models: 15-53 s measured here, docs/engines.md)."""
    endpoints: ClassVar[Endpoints] = Endpoints()
    chat_extras: ClassVar[Mapping[str, Any]] = {}
    """Fields the load generator's chat body adds for this engine (none by default)."""
    metrics: ClassVar[MetricNames | None] = None
    options: ClassVar[Mapping[str, Option]] = {}
    """The keys it takes under `engine.options` (none by default); `check_options` refuses
    any other."""
    flags_of: ClassVar[str | None] = None
    """The engine whose command-line flags it takes and whose parser checks them (the
    simulator takes SGLang's); None = its own."""

    @property
    def simulated(self) -> bool:
        """Whether its numbers are modelled, not measured (labelled SIMULATION everywhere): it
        has a model, `engines.modeller(name)` (engines/<name>/modeller.py, engines/modelling.py)."""
        return engines.modeller(self.name) is not None

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        """The server's command line and how to start, probe and stop it. Raises ValueError
        (with one line naming the setting) for a variant the engine cannot run."""
        raise NotImplementedError(f"engine {self.name} launches no server")

    def detect_version(self, python: str) -> str | None:
        """The version installed beside `python`, or None when it cannot be told."""
        return None

    def validate(self, argvs: Mapping[str, Sequence[str]], python: str
                 ) -> tuple[str, bool, list[FlagProblem]]:
        """Check labelled command lines with the engine's own argument parser, in one
        subprocess of `python` (engines/validation.py): (engine version, whether its config
        object was constructed too, problems). ValidationUnavailable when that parser cannot
        be run."""
        raise ValidationUnavailable(f"{self.label} has no command line to check")

    def start_seconds(self, device: str) -> float:
        """A server start, for the plan's estimate."""
        return self.cpu_start_estimate_s if device == "cpu" else self.start_estimate_s

    def gpus(self, tp_size: int, device: str) -> int:
        """GPUs one server reserves: its tensor-parallel size on GPUs, none on the CPU or for a
        server that is not launched."""
        return tp_size if self.launches and device == "cuda" else 0

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        """What a user should read in the plan about one server group: its variant config
        (`name`, `args`, `env`, `speculative_disable_above_batch`) at the concurrencies its
        cells run (none by default)."""
        return []

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """The `speculative_disable_above_batch` values this engine tells apart for a
        speculative variant, ascending, each below its running cap (a threshold at the cap
        never switches speculation off); None when the engine cannot switch speculation off
        by batch size. `hardware` names the GPU kind (`hardware.name`), for engines whose
        granularity depends on its memory."""
        return None

    def check_options(self, options: Mapping[str, Any]) -> None:
        """OptionError (engines/options.py: one line starting with the key) for a key this
        engine does not declare in `options` or a value it does not take."""
        check_options(self.options, options, self.name)

    def server_url(self, options: Mapping[str, Any]) -> str | None:
        """The base URL of a server someone else runs, from the options; None for an engine
        that launches its own (the server's URL is known once it runs)."""
        return None

    def clock_scale(self, options: Mapping[str, Any]) -> float:
        """Wall seconds per second of the server's own clock: 1 for a real server; a
        simulator running its modelled time faster than the wall's says by how much (the
        load generator reports its figures on that clock, actors/loadgen/timeline.py)."""
        return 1.0

    def version_label(self, options: Mapping[str, Any], version: str | None) -> str | None:
        """What changes the engine's numbers besides its flags, as one string (part of every
        cell's identity): its name and `version` (as detected where the server runs, or as
        given; None = unknown). None for a server someone else runs (its cells record the
        version its /server_info reports)."""
        if not self.launches:
            return None
        return f"{self.name} {version or 'unknown'}"

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """The server flags and files that pin `request.depth_schedule` on this engine, with
        the depth each running batch gets; None when the engine cannot set a depth by batch
        size. ValueError (one line) for a variant the schedule cannot run on."""
        return None
