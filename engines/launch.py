"""What it takes to start one server process: the engine-neutral contract between the plan,
engines/ and the ServerActor. The plan says which server it wants (`ServerRequest`, plain values
from a cell's config); an engine builds its LaunchSpec (`Engine.launch_spec`); the actor adds the
ports it chose, starts the process on the GPUs Ray gave it, and waits for readiness.

Files a server reads (SGLang's adaptive speculation config) travel as content in `files`; the
command names them under the `FILES_DIR` placeholder, which the actor replaces with a folder it
owns on the server's node. Building a LaunchSpec therefore writes nothing, and no shared file
system is needed."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from engines.depth import DepthTiers
from engines.forced import ForcedAcceptance

FILES_DIR = "{files}"
"""Placeholder in `LaunchSpec.argv` for the folder that holds the spec's `files` on the node."""

DRAFT_SHAPE_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size",
                    "num_attention_heads", "num_key_value_heads", "vocab_size")
"""What in a draft model's config.json sets its cost per pass: drafters that agree on these
differ in acceptance only (the twin of known acceptance, engines/sim/twin/node.py, requires
it)."""
SPEC_METHODS: dict[str, str] = {"EAGLE3": "eagle3", "EAGLE": "eagle",
                                "STANDALONE": "draft_model", "NGRAM": "ngram"}
"""A speculative algorithm in the variants' vocabulary (SGLang's speculative_algorithm) -> vLLM's
speculative method for it (`--speculative-config` `method`)."""


@dataclass(frozen=True)
class LogPhase:
    """A line pattern in the server log that marks a start-up phase (shown as progress)."""

    pattern: str
    """Regular expression searched in each log line."""
    label: str
    """What the phase is called in progress output, e.g. 'loading weights'."""


@dataclass(frozen=True)
class StartupTiming:
    """A log line in which the engine says how long start-up phases took: a regular expression
    whose named groups are phases, each group's text a number of seconds, or `name=seconds`
    pairs (phases `group.name`; pairs of 0 seconds are dropped)."""

    pattern: str
    combine: Literal["max", "sum"] = "max"
    """Several matches of one phase: `max` (ranks that ran it in parallel, or one line per
    process), or `sum` within one process (the target's and the draft model's weights load one
    after the other) and the max over processes (vLLM tags a worker's lines `(Name pid=N)`)."""


_PAIRS = re.compile(r"(\w+)=([0-9]+(?:\.[0-9]*)?)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?")
_PROCESS = re.compile(r"\(\w+ pid=\d+\)")


def startup_timings(log: str, timings: Iterable[StartupTiming]) -> dict[str, float]:
    """Phase -> seconds, as the engine's own start-up log states them (`timings` of its
    LaunchSpec); phases it does not log are absent."""
    out: dict[str, float] = {}
    for timing in timings:
        per_process: dict[tuple[str, str], float] = {}
        for m in re.finditer(timing.pattern, log):
            line_start = log.rfind("\n", 0, m.start()) + 1
            tag = _PROCESS.search(log, line_start, m.start())
            process = tag.group(0) if tag else ""
            for name, text in m.groupdict().items():
                if text is None:
                    continue
                values = ({name: float(text)} if _NUMBER.fullmatch(text) else
                          {f"{name}.{k}": float(v) for k, v in _PAIRS.findall(text)
                           if float(v) > 0})
                for phase, seconds in values.items():
                    key = (phase, process)
                    before = per_process.get(key)
                    if before is None:
                        per_process[key] = seconds
                    elif timing.combine == "sum":
                        per_process[key] = before + seconds
                    else:
                        per_process[key] = max(before, seconds)
        for (phase, _), seconds in per_process.items():
            out[phase] = round(max(out.get(phase, 0.0), seconds), 6)  # 0.05 + 0.02 = 0.07
    return out


@dataclass(frozen=True)
class Endpoints:
    """The optional HTTP endpoints of a server, beside the OpenAI ones every engine serves.
    None = the server has no such endpoint (the call is skipped, with a note, never retried)."""

    flush_cache: str | None = "/flush_cache"
    """POST that empties the prefix cache between cells (SGLang's `/flush_cache`, vLLM's
    `/reset_prefix_cache`)."""
    server_info: str | None = "/server_info"
    """GET of the server's configuration, recorded with every cell."""
    native_generate: bool = True
    """Whether SGLang's native `/generate` is served (workload.endpoint=generate)."""


@dataclass(frozen=True)
class LaunchSpec:
    """One server process to start. Everything here is decided before any process starts."""

    argv: list[str]
    """Full command line without the port and API key flags (the actor appends those, so no
    planned command holds a secret)."""
    host: str = "127.0.0.1"
    """Address the server binds to (its `--host`, already in `argv`)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set over the node's environment (NCCL_*, CUDA_*, SGLANG_* grid factors)."""
    port_flag: str = "--port"
    """Flag that receives the HTTP port the actor chose."""
    extra_port_flags: tuple[str, ...] = ()
    """Flags that each receive a further free port (e.g. SGLang's --nccl-port)."""
    health_path: str = "/health"
    """GET path that answers 200 once the server can serve."""
    ready_timeout_s: float = 1800.0
    """How long start-up may take before the server is declared never-ready."""
    stop_timeout_s: float = 20.0
    """How long SIGTERM may take before the whole process group gets SIGKILL."""
    log_phases: tuple[LogPhase, ...] = ()
    """Start-up phases recognised in the log, for progress lines."""
    startup_timings: tuple[StartupTiming, ...] = ()
    """Lines in which the engine logs its start-up phases' seconds (recorded per start)."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token the server expects (sent with every request to it); never logged, kept out
    of reprs."""
    api_key_flag: str = "--api-key"
    """Flag that receives `api_key` (appended by the actor at launch)."""
    files: dict[str, str] = field(default_factory=dict)
    """File name -> content, written into the `FILES_DIR` folder before the process starts."""
    endpoints: Endpoints = field(default_factory=Endpoints)
    """The server's optional endpoints (cache flush, server info)."""
    start_seed_flag: str | None = None
    """Flag that receives a seed of each server start (the simulator's `--sim-start-seed`,
    for its per-start draws); None = the engine takes none."""

    def argv_in(self, files_dir: str) -> list[str]:
        """The command with `FILES_DIR` replaced by `files_dir` (where `files` were written)."""
        return [arg.replace(FILES_DIR, files_dir) for arg in self.argv]

    def env_in(self, files_dir: str) -> dict[str, str]:
        """The environment with `FILES_DIR` replaced by `files_dir` (a private TMPDIR, say)."""
        return {k: v.replace(FILES_DIR, files_dir) for k, v in self.env.items()}

    @property
    def binds_beyond_loopback(self) -> bool:
        """Whether the server listens on more than its node's loopback interface."""
        return binds_beyond_loopback(self.host)

    def with_run_key(self, run_key: str) -> LaunchSpec:
        """The spec a run launches: a server that binds beyond loopback and has no API key of
        its own gets the run's `run_key`; a server reachable only from its node needs none."""
        if self.api_key or not self.binds_beyond_loopback:
            return self
        return replace(self, api_key=run_key)


    def with_start_seed(self, seed: int) -> LaunchSpec:
        """The spec of one start: `start_seed_flag seed` appended, unless the engine takes no
        such flag or the command already sets it (a value given in the config holds)."""
        if self.start_seed_flag is None or self.start_seed_flag in self.argv:
            return self
        return replace(self, argv=[*self.argv, self.start_seed_flag, str(seed)])


def env_value(value: Any) -> str:
    """A variant env value as the server process sees it: bools as "1"/"0", the rest `str()`."""
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


def binds_beyond_loopback(host: str) -> bool:
    """Whether binding to `host` (an IPv4 address) reaches beyond the node itself."""
    return not ipaddress.IPv4Address(host).is_loopback


Device = Literal["cuda", "cpu"]


@dataclass(frozen=True)
class ServerRequest:
    """One server to spell, as plain values from a cell's resolved config."""

    args: Mapping[str, Any]
    """The variant's args (SGLang ServerArgs field names)."""
    env: Mapping[str, Any]
    """The variant's environment over the node's."""
    model_path: str
    draft_model_path: str | None = None
    served_model_name: str | None = None
    tp_size: int = 1
    disable_above_batch: int | None = None
    """Speculation off above this batch size (the variant's speculative_disable_above_batch)."""
    depth_schedule: DepthTiers | None = None
    """The speculative depth by running batch (the variant's speculative_depth, checked)."""
    adaptive: bool = False
    """The engine's own runtime adaptation of the depth (the variant's speculative_adaptive)."""
    adaptive_config: str | None = None
    """Its tiers, a JSON file in SGLang's format (None = the engine's default tiers)."""
    forced: ForcedAcceptance | None = None
    """The acceptance the engine is to force (the variant's forced_acceptance, checked;
    engines/forced.py); None = the drafter's own."""
    python: str = ""
    """The interpreter that runs the engine ("" = the driver's own)."""
    version: str | None = None
    """The engine version the flags are spelled for (None = as given)."""
    device: Device = "cuda"
    """Where the model runs: GPUs (cuda) or the node's CPU (tiny models, CI)."""
    host: str = "127.0.0.1"
    api_key: str | None = field(default=None, repr=False)
    ready_timeout_s: float = 1800.0
    stop_timeout_s: float = 20.0
    revision: str | None = None
    draft_revision: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    """The engine's own settings (`engine.options`, checked by `Engine.check_options`):
    SGLang's `launcher`, the simulator's `--sim-*` flags."""
