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
- how long a cell's load takes, where the engine can tell before measuring it
  (`estimate_cell_seconds` of a `CellWork`: the simulator from its own model; a real server's
  speed is unknown until measured, so the plan uses the run's measured cells instead);
- its own settings (`options`, `engine.options.<key>` in the config), checked before anything
  starts (`check_options`), and what follows from them: a server's URL when someone else runs
  it (`server_url`), what besides its flags makes its numbers (`version_label`), and for an
  engine that models its numbers, where a cell stands against what the model was calibrated
  on (`envelope`, from a `Scenario` of plain values: the plan's and the report's one answer).
- what its numbers stand for beyond its label (`provenance`: the simulator on a twin's
  profile says whose twin), and a twin fitted to a run's measured cells (`fit_twin`,
  docs/twin.md; only the simulator has one);
- a speculative depth schedule in its own words (`depth_setting`: what an operator pastes, and
  the depth each running batch gets as the engine routes it), and whether it can adapt the
  depth at run time (`adaptive_refusal`).

A depth schedule (`variant.speculative_depth`) is engine-neutral (engines/depth.py); each
engine turns it into its own form.

Variants speak one vocabulary, SGLang's ServerArgs field names (`max_running_requests`,
`speculative_algorithm`, ...): the shipped variants mean the same thing on every engine, and an
engine maps what it has an equivalent for (engines/vllm/command.py has vLLM's table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from engines.depth import DepthSetting, DepthTiers
from engines.forced import ForcedAcceptance
from engines.launch import Endpoints, LaunchSpec
from engines.options import Option, check_options
from engines.validation import FlagProblem, ValidationUnavailable
from specgrid_metrics.counters import Sample, counter_delta

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


@dataclass(frozen=True)
class Scenario:
    """What one cell asks of a server, as plain values: from its config when the plan checks
    it, from what it recorded when a report does. An engine that models its numbers judges it
    against what its model was calibrated on (`Engine.envelope`)."""

    args: Mapping[str, Any]
    """The variant's args (SGLang ServerArgs field names)."""
    concurrency: float | None = None
    """Requests in flight: a closed-loop cell's concurrency, or an open-loop cell's mean
    running batch where it was measured (None = not known)."""
    rate: float | None = None
    """Open loop: arrivals per second, whose implied batch stands in for an unknown
    `concurrency`."""
    max_in_flight: int | None = None
    """Open loop: the cap on requests in flight."""
    output_tokens: int | None = None
    """The most output tokens of a request."""
    prompt_tokens: tuple[int, int] | None = None
    """The shortest and longest prompt, in tokens."""
    domains: Sequence[str] = ()
    """The prompts' domain labels."""
    disable_above_batch: int | None = None
    """The variant's speculative_disable_above_batch."""
    depth_schedule: bool = False
    """The variant sets the speculative depth by running batch (speculative_depth)."""
    adaptive: bool = False
    """The variant has the engine adapt the depth at run time (speculative_adaptive)."""
    conversations: bool = False
    """Multi-turn conversation replay (a growing context per conversation)."""
    tp_size: int = 1
    env: Mapping[str, Any] = field(default_factory=dict)
    """The variant's environment."""


@dataclass(frozen=True)
class EnvelopeFinding:
    """Where a Scenario stands against an engine's calibration."""

    outside: tuple[str, ...]
    """Why it lies outside, one phrase each; empty = inside."""
    covered: str
    """What the calibration covers, one line (or why there is none)."""


@dataclass(frozen=True)
class ConversationWork:
    """What a conversation cell's load will send, counted from its planned specs (the rounds
    each client replays: ``num_conversations`` and ``max_turns`` applied)."""

    conversations: int
    rounds: int
    """Σ over conversations of the rounds replayed: the cell's requests."""
    output_tokens: int
    """Σ of each round's output length (the trace's, else ``max_new_tokens``)."""
    new_tokens: int
    """Σ of each round's new context (its messages; round 0 also the system prompt and tool
    schemas), estimated as characters / 4: what prefill computes when the rest of the history
    comes from the prefix cache."""
    think_s: float
    """Σ of the think times before rounds (the runner's own seeded schedule)."""
    open_loop: bool
    """Conversations start at a rate or at the trace's times (not a fixed number in flight)."""
    last_arrival_s: float
    """Open loop: offset of the last conversation's start (0 in a closed loop)."""


@dataclass(frozen=True)
class CellWork:
    """One cell's load as plain values, for an engine's estimate of how long it takes."""

    config: Mapping[str, Any]
    """The cell's resolved config (`engine`, `variant`, `workload`, `load` sections)."""
    tp_size: int
    num_requests: int
    """Measured requests of a prompt cell (warm-up not included: `load.warmup_requests`)."""
    concurrency: int | None
    """Requests in flight (closed loop), or the open loop's cap."""
    rate: float | None
    """Open loop: arrivals per second (None = closed loop)."""
    conversation: ConversationWork | None = None
    """A conversation cell's work (its rounds, not `num_requests`, are its requests)."""


@dataclass(frozen=True)
class SpeedupQuestion:
    """What a search asks a model of the server before measuring (`grid.search.prior`): the
    speedup of one speculative variant over the baseline at each load, on one workload, as
    plain values from the plan."""

    baseline: Mapping[str, Any]
    """The baseline cell's resolved config (`engine`, `variant`, `workload`, `load`)."""
    variant: Mapping[str, Any]
    """The speculative variant's cell's resolved config."""
    tp_size: int
    loads: tuple[int, ...]
    """Closed-loop concurrencies to predict."""
    prompt_tokens: float
    """Mean estimated prompt tokens of the workload's prompts."""
    domains: Mapping[str, float]
    """The workload's prompt domain labels and the share of its prompts each holds."""
    requests_per_stream: float
    """Requests each stream sends in a cell (the cell's requests / its concurrency)."""


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


@dataclass(frozen=True)
class MeasuredCell:
    """One committed closed-loop cell of a run, as plain values, for fitting a twin
    (`Engine.fit_twin`): what the run's cells and requests tables hold about it."""

    cell_id: str
    variant: str
    workload: str
    engine: str
    """The engine that measured it (`sim`, `sglang`, `vllm`, `external`)."""
    engine_version: str | None
    model: str
    """The model config's name (`model.name`)."""
    concurrency: int
    num_requests: int
    temperature: float
    server_command: str
    """The server's command line as recorded (its flags say the speculative shape and cap)."""
    server_info: str | None
    """The server's /server_info JSON as recorded (its resolved caps and KV pool)."""
    output_tok_s: float | None
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    accept_length: float | None
    """Per-request accept length (completion tokens / verify steps)."""
    accept_length_decode: float | None
    """Decode tokens per verify step from the server's counters."""
    acceptance_per_position: tuple[float, ...] | None
    """Share of verify steps whose i-th draft token was accepted (engines that count it)."""
    prompt_tokens: tuple[float, int, int]
    """Server-counted prompt tokens of its ok requests: (mean, shortest, longest)."""
    output_tokens: tuple[float, int, int]
    """Output tokens of its ok requests: (mean, fewest, most)."""
    domains: Mapping[str, float]
    """Share of its ok requests per prompt-domain label (empty: the requests carry none)."""


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
    options: ClassVar[Mapping[str, Option]] = {}
    """The keys it takes under `engine.options` (none by default); `check_options` refuses
    any other."""
    flags_of: ClassVar[str | None] = None
    """The engine whose command-line flags it takes and whose parser checks them (the
    simulator takes SGLang's); None = its own."""
    alignment_acceptance: ClassVar[tuple[float, float] | None] = None
    """For an engine that models acceptance from a prompt's alignment with the drafter's
    training data (the simulator): the alignment at or below which every prompt gets the same
    off-distribution acceptance, and the one from which acceptance is full. None = acceptance
    is measured, not modelled."""

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

    def estimate_cell_seconds(self, work: CellWork) -> float | None:
        """Seconds the cell's load takes (warm-up included, the driver's per-cell overhead not),
        or None when the engine cannot tell before measuring: the default, since a real
        server's speed depends on its model, GPUs and flags (the plan then estimates from the
        run's measured cells of the same server, grid/plan/estimate.py)."""
        return None

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

    def fit_problem(self, variant: Mapping[str, Any], options: Mapping[str, Any],
                    tp_size: int) -> str | None:
        """Why a server of this variant (its config: `args`, ...) cannot start on its GPUs
        with these engine options and tensor-parallel size (its weights leave no room for a
        KV cache), one line; None when it fits or when the engine cannot tell before starting
        (a real engine says it itself at start-up, and the cell's error carries its log)."""
        return None

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

    def drafter_options(self, train_data: str | None, train_mix: Mapping[str, float] | None
                        ) -> dict[str, Any]:
        """Options that make the engine's acceptance follow the drafter's training data (a
        resolved path) or mix, for an engine that models acceptance (the simulator); a real
        engine's drafter is its weights: none."""
        return {}

    def version_label(self, options: Mapping[str, Any], version: str | None) -> str | None:
        """What changes the engine's numbers besides its flags, as one string (part of every
        cell's identity): its name and `version` (as detected where the server runs, or as
        given; None = unknown). None for a server someone else runs (its cells record the
        version its /server_info reports)."""
        if not self.launches:
            return None
        return f"{self.name} {version or 'unknown'}"

    def envelope(self, options: Mapping[str, Any], scenario: Scenario) -> EnvelopeFinding | None:
        """Where `scenario` stands against what the engine's numbers were calibrated on; None
        for an engine whose numbers are measured (no envelope). ValueError when `options`
        name a calibration that cannot be read."""
        return None

    def modelled_gpus(self, server_info: Mapping[str, Any]) -> float | None:
        """The GPUs a cell's numbers stand for, from its server's /server_info, for an engine
        that models GPUs (the simulator's profile may stand for a whole node behind one
        server); None = the GPUs the server was given are the ones that served."""
        return None

    def provenance(self, options: Mapping[str, Any]) -> str | None:
        """What this engine's numbers stand for beyond `label` and `simulated`, from its
        engine config (`options`), e.g. `twin of RUN` for the simulator on a twin's profile;
        None when there is nothing to add. ValueError for options it cannot read."""
        return None

    def fit_twin(self, cells: Sequence[MeasuredCell], *, run_id: str,
                 hardware: str | None = None, model: str | None = None,
                 start: str | None = None, seed: int = 0, replicates: int = 20,
                 holdout: Sequence[int] = (), holdout_workloads: Sequence[str] = ()
                 ) -> dict[str, Any]:
        """A twin of the server that measured `cells` (docs/twin.md): a profile of this
        engine fitted to them, as the JSON document to write beside the run (`twin.json`),
        with the fit's factors and intervals, every cell's fit and the leave-one-load-out
        error. `hardware` / `model` name the profiles that describe the node (datasheet,
        shapes), `start` the profile whose factors the fit starts from; `seed` and
        `replicates` the bootstrap's; `holdout` loads and `holdout_workloads` workloads held
        out as a split of their own (fitted on the other cells, predicted). ValueError (one
        line) when the cells cannot be fitted."""
        raise ValueError(f"{self.label} cannot be fitted as a twin (engine=sim can)")

    def predict_speedups(self, profile: str, question: SpeedupQuestion
                         ) -> tuple[float, ...] | None:
        """The speedup (variant / baseline - 1 in output tok/s) at each of `question.loads`
        as this engine's model with the fitted `profile` (a twin's file, `fit_twin`) predicts
        it; None for an engine without a model. ValueError (one line) for a profile it cannot
        read."""
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
