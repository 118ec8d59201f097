"""The engine interface: everything the driver knows about a kind of inference server, behind one
class. `engines/<name>/engine.py` implements it for each kind (`sim`, `sglang`, `vllm`,
`external`); `engines.get(name)` finds it by that folder name, so adding an engine touches its
folder and a config file (`conf/engine/<name>.yaml`), nothing in `grid/`.

What an engine answers, all as pure functions of plain values (no Ray, no sockets, nothing
written; version detection and validation run a subprocess of the engine's own Python):

- the server's command line (`launch_spec`) from a variant and a model (`ServerRequest`);
- its version (`detect_version`) and a check of command lines by its own argument parser
  (`validate`);
- readiness, start-up log phases and the endpoints it serves (`Endpoints`, in the LaunchSpec);
- the names of its `/metrics` series (`MetricNames`): throughput, queue, KV-cache use and the
  speculative counters, and the accept length a cell gets from their increases;
- warnings a user should read in the plan (`plan_warnings`);
- the `speculative_disable_above_batch` values it honours as distinct behaviours
  (`threshold_values`), which a threshold search ranks (docs/search.md);
- a speculative depth schedule in its own words (`depth_setting`: what an operator pastes, and
  the depth each running batch gets as the engine routes it), and whether it can adapt the
  depth at run time (`adaptive_refusal`).

A depth schedule (`variant.speculative_depth`, `DepthTiers`) is engine-neutral: tiers
`(from batch size, depth)`, ascending, the first from 1, depths >= 0 (0 = no drafting);
`depth_schedule` checks one. Each engine turns it into its own form: vLLM's
`num_speculative_tokens_per_batch_size`, SGLang's (and the simulator's) adaptive config with one
candidate per tier.

Variants speak one vocabulary, SGLang's ServerArgs field names (`max_running_requests`,
`speculative_algorithm`, ...): the shipped variants mean the same thing on every engine, and an
engine maps what it has an equivalent for (engines/vllm/command.py has vLLM's table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from engines.launch import Endpoints, LaunchSpec
from engines.validation import FlagProblem, ValidationUnavailable
from specgrid_metrics.counters import Sample, counter_delta

Device = Literal["cuda", "cpu"]

DepthTiers = tuple[tuple[int, int], ...]
"""A speculative depth schedule: (from running batch size, depth) pairs, ascending, the first
from 1; a tier holds up to the next one's start (the last one: every larger batch)."""


def depth_schedule(value: Any) -> DepthTiers:
    """`value` (`[[1, 5], [9, 3], [33, 1], [65, 0]]`) as DepthTiers; ValueError with one line
    naming what is wrong: not a list of [batch, depth] pairs of ints, a first tier not from 1,
    starts not ascending, a negative depth, or no tier that drafts (that is the baseline)."""
    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value or not all(
            not isinstance(t, str | bytes) and isinstance(t, Sequence) and len(t) == 2
            and whole(t[0]) and whole(t[1]) for t in value):
        raise ValueError("speculative_depth must be a non-empty list of [from batch size, "
                         f"depth] pairs of ints, e.g. [[1, 5], [9, 3], [65, 0]]; got {value!r}")
    tiers = tuple((int(t[0]), int(t[1])) for t in value)
    if tiers[0][0] != 1:
        raise ValueError(f"speculative_depth must start from batch size 1, got {tiers[0][0]} "
                         "(every running batch needs a depth)")
    for (a, _), (b, _) in zip(tiers, tiers[1:], strict=False):
        if b <= a:
            raise ValueError(f"speculative_depth tiers must be ascending by batch size: {b} "
                             f"follows {a}")
    negative = [d for _, d in tiers if d < 0]
    if negative:
        raise ValueError(f"speculative_depth depths must be >= 0 (0 = no drafting), got "
                         f"{negative[0]}")
    if max(d for _, d in tiers) == 0:
        raise ValueError("speculative_depth drafts at no batch size (every depth is 0): that "
                         "is the baseline, not a speculative variant")
    return tiers


@dataclass(frozen=True)
class DepthSetting:
    """A depth schedule in one engine's words: what to paste, and what it does there."""

    engine: str
    flags: tuple[str, ...]
    """The server flags that set it (file names as in `files`)."""
    files: Mapping[str, str] = field(default_factory=dict)
    """File name -> content the flags name (SGLang's adaptive config)."""
    tiers: tuple[tuple[int, int | None, int], ...] = ()
    """The depth each running batch gets as the engine routes it: (first batch, last batch or
    None = and above, depth), which may differ from the schedule's tiers (SGLang pads a batch
    to a captured CUDA-graph size before it picks the tier)."""


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
    """Engine-specific settings of the engine config (SGLang's `launcher`, the simulator's
    `sim_args`)."""


@dataclass(frozen=True)
class MetricNames:
    """The `/metrics` series of one engine family that specgrid reads. None = not exposed."""

    family: str
    """The name prefix, e.g. `sglang` or `vllm`."""
    generation_tokens: str | None = None
    """Counter of output tokens."""
    requests_finished: str | None = None
    """Counter of finished requests."""
    running: str | None = None
    """Gauge of running requests."""
    waiting: str | None = None
    """Gauge of queued requests."""
    kv_usage: str | None = None
    """Gauge of KV-cache use (0-1)."""
    spec_steps: str | None = None
    """Counter of verify steps, one per request per step (SGLang's verify calls, vLLM's drafts)."""
    spec_accepted: str | None = None
    """Counter of accepted draft tokens (vLLM)."""
    spec_draft_tokens: str | None = None
    """Counter of proposed draft tokens (vLLM)."""
    spec_accepted_per_pos: str | None = None
    """Counter of accepted draft tokens by position, label `position` (vLLM)."""

    def accept_length(self, samples: Sequence[Sample]) -> dict[str, Any]:
        """The cell's accept length from the increases of the speculative counters over the
        cell's scrapes (first just before the measured window, last just after):

        * ``accept_length`` = Δgeneration tokens / Δverify steps: SGLang's per-request
          definition (completion / verify steps, the first token included) summed over the cell;
        * ``accept_length_decode``: tokens per verify step during decode, 1 + Δaccepted /
          Δsteps where the engine counts accepted tokens (vLLM's own "mean acceptance length"),
          else (Δgeneration - Δrequests) / Δsteps (each request's first token comes from
          prefill, not a verify step);
        * ``acceptance_per_position``: Δaccepted at draft position i / Δsteps, the share of
          steps whose i-th draft token was accepted (vLLM), as a list;
        * ``accept_length_source``: ``"server_metrics"``, or None when the counters are missing
          or saw no verify step (then every figure is None).
        """
        none = {"accept_length": None, "accept_length_decode": None,
                "acceptance_per_position": None, "accept_length_source": None}
        steps = counter_delta(samples, self.spec_steps) if self.spec_steps else None
        if not steps:
            return none
        gen = counter_delta(samples, self.generation_tokens) if self.generation_tokens else None
        accepted = counter_delta(samples, self.spec_accepted) if self.spec_accepted else None
        requests = (counter_delta(samples, self.requests_finished)
                    if self.requests_finished else None)
        if accepted is not None:
            decode: float | None = 1.0 + accepted / steps
        elif gen is not None and requests is not None:
            decode = (gen - requests) / steps
        else:
            decode = None
        return {
            "accept_length": gen / steps if gen is not None else None,
            "accept_length_decode": decode,
            "acceptance_per_position": self.per_position(samples, steps),
            "accept_length_source": "server_metrics",
        }

    def per_position(self, samples: Sequence[Sample], steps: float) -> list[float] | None:
        """Δaccepted tokens at each draft position / Δsteps, positions in order; None when the
        engine exposes no per-position counter."""
        name = self.spec_accepted_per_pos
        if not name or not steps:
            return None
        by_position: dict[int, list[Sample]] = {}
        for sample in samples:
            if sample[1] == name and "position" in sample[2]:
                by_position.setdefault(int(sample[2]["position"]), []).append(sample)
        rates = []
        for position in sorted(by_position):
            delta = counter_delta(by_position[position], name)
            rates.append((delta or 0.0) / steps)
        return rates or None


class Engine:
    """One kind of inference server (module docstring). Subclasses set the class attributes
    and implement `launch_spec`; the rest has defaults for an engine without them."""

    name: ClassVar[str]
    """The config name (`engine=<name>`) and folder under engines/."""
    label: ClassVar[str]
    """How reports and provenance name it, e.g. `SGLang`."""
    simulated: ClassVar[bool] = False
    """Whether its numbers are modelled (labelled SIMULATION everywhere)."""
    launches: ClassVar[bool] = True
    """False for a server someone else runs (nothing to start, no GPUs to reserve)."""
    start_estimate_s: ClassVar[float] = 600.0
    """A server start on GPUs, for the plan's estimate (a real model load takes minutes)."""
    cpu_start_estimate_s: ClassVar[float] = 60.0
    """A server start on the CPU (tiny models: 15-53 s measured here, docs/engines.md)."""
    endpoints: ClassVar[Endpoints] = Endpoints()
    metrics: ClassVar[MetricNames | None] = None

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

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """The server flags and files that pin `request.depth_schedule` on this engine, with
        the depth each running batch gets; None when the engine cannot set a depth by batch
        size. ValueError (one line) for a variant the schedule cannot run on."""
        return None

    def adaptive_refusal(self, variant: Mapping[str, Any]) -> str | None:
        """Why this engine cannot adapt the speculative depth at run time for `variant`
        (its config: `args`, ...), as one line; None when it can."""
        return f"{self.label} has no runtime adaptation of the speculative depth"


SGLANG_METRICS = MetricNames(
    family="sglang",
    generation_tokens="sglang:generation_tokens_total",
    requests_finished="sglang:num_requests_total",
    running="sglang:num_running_reqs",
    waiting="sglang:num_queue_reqs",
    kv_usage="sglang:token_usage",
    spec_steps="sglang:spec_verify_calls_total",
)
"""SGLang 0.5.23 (`srt/observability/metrics_collector.py`): `observe_one_finished_request` adds
a request's completion tokens, its verify count and 1 request to these counters when it
finishes, so the deltas over a cell cover exactly the requests that finished in it."""

VLLM_METRICS = MetricNames(
    family="vllm",
    generation_tokens="vllm:generation_tokens_total",
    requests_finished="vllm:request_success_total",
    running="vllm:num_requests_running",
    waiting="vllm:num_requests_waiting",
    kv_usage="vllm:kv_cache_usage_perc",
    spec_steps="vllm:spec_decode_num_drafts_total",
    spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
    spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    spec_accepted_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos_total",
)
"""vLLM 0.32.0 (`vllm/v1/metrics/loggers.py`, `vllm/v1/spec_decode/metrics.py`): the speculative
counters grow per scheduled step with drafts, one draft per request per step, and the
per-position counter by the position of the accepted token in the draft."""

FAMILIES: Mapping[str, MetricNames] = {m.family: m for m in (SGLANG_METRICS, VLLM_METRICS)}
"""Metric families by name prefix, for a server whose engine is detected from its /metrics."""


def detect_family(names: Iterable[str]) -> MetricNames | None:
    """The metric family of a server from the names it exposes (`vllm:...`, `sglang:...`), or
    None when none is known."""
    for name in names:
        family = FAMILIES.get(name.split(":", 1)[0]) if ":" in name else None
        if family is not None:
            return family
    return None
