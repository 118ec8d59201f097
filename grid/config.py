"""The config schema: one dataclass per component, registered with Hydra's ConfigStore so that a
wrong type or an unknown key fails at composition with Hydra's own message.

OmegaConf cannot type a field as `Literal`, so choice fields are `str` in the schema and their
allowed values are the `Literal` aliases below, checked by `check_choices` right after
composition (before anything expensive starts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

EngineName = Literal["sim", "sglang", "external"]
SglangLauncher = Literal["serve", "launch_server"]
Endpoint = Literal["generate", "chat"]
Arrival = Literal["poisson", "gamma", "constant"]
Transport = Literal["raw", "aiohttp", "httpx"]


class ConfigError(ValueError):
    """A config that cannot run; the message is one line naming the problem."""


@dataclass
class EngineConfig:
    name: str = "sim"
    """Which engine serves the variants: one of EngineName."""
    python: str = ""
    """Interpreter that runs the engine program ("" = the driver's own)."""
    launcher: str = "serve"
    """SGLang only: `sglang serve` or `python -m sglang.launch_server` (SglangLauncher)."""
    version: str | None = None
    """SGLang version the flags are built for; None = read it from `python`."""
    url: str | None = None
    """External only: base URL of a server someone else runs (http://host:port)."""
    validate_python: str | None = None
    """A Python with SGLang installed whose own parser checks every server command before
    anything starts (default: `python` for engine=sglang; unset for the simulator = not checked)."""
    api_key: str | None = None
    """Bearer token the server expects (passed as --api-key to launched servers)."""
    ready_timeout_s: float = 1800.0
    """Start-up budget before a server is declared never-ready (big models load for minutes)."""
    stop_timeout_s: float = 20.0
    """SIGTERM grace before the whole process group is killed."""
    sim_args: dict[str, Any] = field(default_factory=dict)
    """Simulator only: its own flags without the `--sim-` prefix, e.g. {profile: default}."""


@dataclass
class ModelConfig:
    name: str = "sim-8gpu"
    """Short slug used in run ids and reports."""
    model_path: str = "specgrid/sim-model"
    """--model-path (a hub id or a local folder on the node)."""
    draft_model_path: str | None = None
    """EAGLE-3 draft model, passed only to speculative variants."""
    served_model_name: str | None = None
    """--served-model-name; also the `model` field of OpenAI requests."""
    tp_size: int = 1
    """GPUs per server unless the variant says otherwise."""


@dataclass
class VariantConfig:
    name: str = "baseline"
    """Label of the variant in results and reports."""
    args: dict[str, Any] = field(default_factory=dict)
    """SGLang ServerArgs field names -> values (speculative_algorithm: EAGLE3, ...)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment over the node's (NCCL_*, CUDA_*, SGLANG_* as grid factors)."""
    tp_size: int | None = None
    """GPUs for this variant's server; None = model.tp_size."""
    speculative_disable_above_batch: int | None = None
    """Speculation off when the running batch exceeds this (becomes an adaptive config)."""


@dataclass
class WorkloadConfig:
    name: str = "coding"
    """Label of the workload in results and reports."""
    prompts: str = "coding.jsonl"
    """Prompt file (JSON lines: prompt_id, domain, text); relative names are in workloads/prompts/."""
    domains: list[str] = field(default_factory=list)
    """Keep only prompts of these domains (empty = all)."""
    endpoint: str = "generate"
    """SGLang native /generate (carries spec_verify_ct) or OpenAI chat (Endpoint)."""
    max_new_tokens: int = 128
    """Output length per request."""
    temperature: float = 0.0
    """Sampling temperature."""
    ignore_eos: bool = True
    """Generate exactly max_new_tokens (comparable cells)."""


@dataclass
class LoadConfig:
    concurrency: int | None = 1
    """Closed loop: requests in flight. With a rate it caps in-flight requests."""
    rate: float | None = None
    """Open loop: mean arrivals per second on a precomputed schedule (None = closed loop)."""
    arrival: str = "poisson"
    """Open-loop arrival process (Arrival)."""
    burstiness: float = 1.0
    """Gamma shape for arrival=gamma; 1.0 is Poisson, below 1 burstier."""
    num_requests: int | None = None
    """Measured requests per cell; None = max(min_requests, requests_per_stream x concurrency)."""
    requests_per_stream: float = 2.0
    """Requests per concurrent stream when num_requests is None."""
    min_requests: int = 8
    """Floor on measured requests per cell."""
    duration_s: float | None = None
    """Bound the load window by time too (whichever ends first)."""
    warmup_requests: int = 2
    """Requests sent first and excluded from results."""
    request_timeout_s: float = 300.0
    """A request taking longer is an error row (catches hung servers)."""
    clients: int = 1
    """LoadGenActors sharing one cell's load."""
    seed: int = 0
    """Seeds prompt order and arrival schedules."""
    transport: str = "raw"
    """HTTP client of the load generator (Transport; docs/loadgen.md): raw (llhttp, stamps
    every read where it arrives), aiohttp (httpx-aiohttp; honours HTTP(S)_PROXY), httpx."""
    tls_verify: bool = True
    """Check the server's TLS certificate (https:// servers)."""
    ca_bundle: str | None = None
    """PEM file of CA certificates to trust instead of the system's (https:// servers)."""
    keepalive_s: float = 60.0
    """Idle keep-alive connections older than this are closed, not reused."""


@dataclass
class GridAxes:
    axes: dict[str, Any] = field(default_factory=dict)
    """Axis name -> list of values. `variant`, `workload`, `model`, `engine` pick config
    options; `concurrency` and `rate` are load settings; any other dotted key
    (variant.env.NCCL_ALGO) sets that config value."""
    include: list[Any] = field(default_factory=list)
    """Extra cells: mappings axis -> value, added after the product."""
    exclude: list[Any] = field(default_factory=list)
    """Rules axis -> value or list of values; a cell matching every key of a rule is dropped."""


@dataclass
class RunConfig:
    id: str | None = None
    """Run folder name; None = derived from the sweep, engine and model (same command resumes)."""
    fresh: bool = False
    """Start a new run folder instead of resuming."""
    retry_failed: bool = True
    """On resume, run failed cells again."""
    max_error_rate: float = 0.1
    """A cell whose request error ratio exceeds this fails."""
    metrics_interval_s: float | None = 1.0
    """Sample the server's /metrics this often during a cell into server_metrics/ (None = off)."""


@dataclass
class ClusterConfig:
    address: str | None = None
    """Join this Ray cluster; None = start a local one."""
    num_gpus: int | None = None
    """GPUs of a local cluster; None = the GPUs found (logical GPUs: 8 for the simulator)."""
    num_cpus: int | None = None
    """CPUs of a local cluster; None = Ray's default."""


@dataclass
class SpecgridConfig:
    engine: EngineConfig = field(default_factory=EngineConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    variant: VariantConfig = field(default_factory=VariantConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    grid: GridAxes = field(default_factory=GridAxes)
    run: RunConfig = field(default_factory=RunConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    sweep: str = "single"
    """Sweep name (set by sweep/*.yaml); part of the default run id."""
    results_dir: str = "results"
    """Where run folders go (relative to the working directory)."""
    plan: bool = False
    """Print the plan (cells, servers, commands, GPUs, estimate) and exit."""


def register_configs() -> None:
    """The root schema; config.yaml lists it first, so every group merged into it is typed."""
    ConfigStore.instance().store(name="specgrid_schema", node=SpecgridConfig)


_CHOICES: dict[str, Any] = {
    "engine.name": EngineName,
    "engine.launcher": SglangLauncher,
    "workload.endpoint": Endpoint,
    "load.arrival": Arrival,
    "load.transport": Transport,
}


def check_choices(cfg: DictConfig | dict[str, Any]) -> None:
    """Raise ConfigError if a choice field holds a value outside its Literal."""
    for key, alias in _CHOICES.items():
        value = OmegaConf.select(cfg, key) if isinstance(cfg, DictConfig) else _dig(cfg, key)
        allowed = get_args(alias)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not one of {', '.join(allowed)}")


def _dig(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d
