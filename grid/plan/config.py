"""The config schema: one dataclass per component, registered with Hydra's ConfigStore so that a
wrong type or an unknown key fails at composition with Hydra's own message.

OmegaConf cannot type a field as `Literal`, so choice fields are `str` in the schema; their
allowed values, and the numbers that can be meant, are checked right after composition by
grid/plan/choices.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


class ConfigError(ValueError):
    """A config that cannot run; the message is one line naming the problem."""


@dataclass
class EngineConfig:
    """The settings every engine has; what only one engine takes is under `options`."""

    name: str = MISSING
    """Which engine serves the variants: a folder of engines/ with an engine.py, each with its
    conf/engine/<name>.yaml (which sets this)."""
    python: str = ""
    """Interpreter that runs the engine program ("" = the driver's own)."""
    device: str = "cuda"
    """Where a launched server runs its model: cuda (the GPUs Ray assigns) or cpu (tiny models
    on any machine, CI included: no GPUs reserved; engines/<name>/ says what it changes)."""
    version: str | None = None
    """Engine version the flags are built for; None = read it from `python`."""
    validate_python: str | None = None
    """A Python with SGLang installed whose own parser checks every server command before
    anything starts (default: `python` for engine=sglang; unset for the simulator = not checked)."""
    host: str = "127.0.0.1"
    """IPv4 address a launched server binds to (--host). 127.0.0.1: reachable only from its
    node, where its load generators run. 0.0.0.0 (every interface, e.g. to reach it from
    another machine) or a node's address: the server gets an API key (docs/cluster.md)."""
    api_key: str | None = None
    """Bearer token the server expects (passed as --api-key to launched servers). Unset, a
    server bound beyond loopback gets a fresh key for each run."""
    ready_timeout_s: float = 1800.0
    """Start-up budget before a server is declared never-ready (big models load for minutes)."""
    stop_timeout_s: float = 20.0
    """SIGTERM grace before the whole process group is killed."""
    options: dict[str, Any] = field(default_factory=dict)
    """The chosen engine's own settings, each key declared and checked by the engine
    (engines/<name>/engine.py `options`, docs/engines.md): the simulator's `--sim-*` flags
    (profile, time_scale, ...), SGLang's launcher, an external server's url."""


@dataclass
class DrafterConfig:
    """What the speculative variants' draft model was trained on (docs/workloads.md)."""

    train_mix: Any = None
    """Training mix, a mapping domain (coding, agentic, math, chat, encyclopedic) or data-set
    family (magicoder, glaive, ...) -> weight; workloads are checked against it when no data is
    given. Typed Any so that a command-line mapping is accepted (Hydra refuses new keys in a
    typed dict); grid/plan/workloads.py check_drafter checks it after composition."""
    train_data: str | None = None
    """The drafter's training data (JSONL, ShareGPT, OpenAI messages, Parquet, or a folder);
    when set, alignment compares prompts with its rows."""


@dataclass
class ModelConfig:
    name: str = "kimi-k2.5-class"
    """Short slug used in run ids and reports."""
    model_path: str = "specgrid/sim-model"
    """--model-path (a hub id or a local folder on the node)."""
    draft_model_path: str | None = None
    """EAGLE-3 draft model, passed only to speculative variants."""
    revision: str | None = None
    """--revision: the model's hub revision (branch, tag or commit); part of a cell's identity."""
    draft_revision: str | None = None
    """--speculative-draft-model-revision for the draft model; part of a cell's identity."""
    served_model_name: str | None = None
    """--served-model-name; also the `model` field of OpenAI requests."""
    tp_size: int = 1
    """GPUs per server unless the variant says otherwise."""
    drafter: DrafterConfig = field(default_factory=DrafterConfig)
    """The EAGLE-3 drafter's training distribution (recorded with every cell)."""


@dataclass
class HardwareConfig:
    name: str = "rtx-pro-6000"
    """GPU kind of the node: the simulator's hardware profile
    (engines/sim/profiles/hardware/<name>.json); recorded for real engines."""
    gpu_hour_usd: float | None = None
    """Price of one GPU-hour in dollars, set by the user (None = no dollar figures): the
    report's dollars per million output tokens per cell and at the capacity under the SLOs
    (GPUs x price / 3600 / output tok/s x 1e6). Not part of a cell's identity."""


@dataclass
class ForcedAcceptanceConfig:
    """The speculative variant's acceptance forced by the engine, not measured from its drafter
    (engines/forced.py, docs/engines.md): a cell that measures the system's side of speculation
    alone, labelled "forced acceptance: performance only". Give one of the two, or neither."""

    length: float | None = None
    """Mean accepted tokens per verify step, the bonus token included, in [1, k + 1] for k =
    speculative_num_steps (SGLang's SGLANG_SIMULATE_ACC_LEN, vLLM's
    synthetic_acceptance_length). None = not forced (unless rates are given)."""
    rates: list[float] | None = None
    """Per-position unconditional acceptance rates, k of them, non-increasing, in [0, 1]
    (r_i: the first i drafts all accepted; mean length 1 + sum). vLLM and the simulator only:
    SGLang forces a mean length. None = not forced (unless length is given)."""
    token_mode: str | None = None
    """Which tokens a forced SGLang step commits (engines/forced.py TOKEN_MODES, SGLang's
    SGLANG_SIMULATE_ACC_TOKEN_MODE): `real-draft-token` (the default: the drafter's tokens, so
    a mixture-of-experts verify routes real text) or `fixed` (one repeated token id). None =
    the default."""


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
    speculative_depth: list[list[int]] | None = None
    """The speculative depth by running batch size: [[from batch, depth], ...] ascending, the
    first from 1, depths >= 0 (0 = no drafting), e.g. [[1, 5], [9, 3], [33, 1], [65, 0]];
    each engine spells it in its own form (docs/engines.md). Not with the threshold above."""
    speculative_adaptive: bool = False
    """The engine's own runtime adaptation of the depth (SGLang and the simulator: EAGLE or
    EAGLE3 with topk 1; refused on vLLM, which has none)."""
    speculative_adaptive_config: str | None = None
    """With speculative_adaptive: its tiers, a JSON file in SGLang's format (None = SGLang's
    default: 1 -> {1,3,5,7}, 8 -> {0,1,3}, 32 -> {0,1}, 64 -> {0})."""
    forced_acceptance: ForcedAcceptanceConfig = field(default_factory=ForcedAcceptanceConfig)
    """The acceptance forced by the engine (length or rates) instead of the drafter's: cells
    for the system's cost of speculation at a known acceptance (the speculation question's
    surface, docs/report.md); never judged for losslessness or recommended for a workload."""


@dataclass
class WorkloadConfig:
    name: str = "coding"
    """Label of the workload in results and reports."""
    prompts: str = "coding.jsonl"
    """Prompt file (JSON lines: prompt_id, domain, source, text); a relative name is looked up
    in workloads/prompts/ (package data)."""
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
    train_data: str | None = None
    """Sample the prompts from this training data instead of `prompts` (docs/workloads.md)."""
    holdout: str | None = None
    """With train_data: draw prompts only from a held-out split -- a file (rows also in
    train_data are never drawn) or a fraction such as 0.1 (a seed-independent hash split)."""
    mix: Any = None
    """With train_data: a mapping source or domain -> weight of the sample (None = the data's
    own mix). Typed Any so `workload.mix={coding: 0.6, agentic: 0.4}` works on the command line;
    checked after composition (grid/plan/workloads.py check_drafter)."""
    num_prompts: int = 256
    """With train_data: prompts drawn."""
    sample_seed: int = 0
    """With train_data: seed of the stratified sample (same seed = same prompts, any process)."""
    input_tokens: list[int] | None = None
    """[min, max] prompt tokens (estimated as characters / 4); None = no shaping."""
    input_shaping: str = "filter"
    """How input_tokens shapes prompts: `filter` drops those outside the range, `fit`
    truncates long ones and pads short ones by repetition (InputShaping)."""
    # --- kind=conversations: multi-turn replay (docs/agentic.md) ----------------------------
    kind: str = "prompts"
    """`prompts` (single requests from `prompts`/`train_data`) or `conversations` (multi-turn
    replay of `conversations`; load.concurrency = conversations in flight) (WorkloadKind)."""
    conversations: str | None = None
    """Conversation file: a name in workloads/conversations_data/ or a path."""
    format: str = "auto"
    """Conversation file format (auto, sglang_agentic, mooncake, sharegpt, openai,
    speed_bench); checked when the file is read, before anything starts."""
    template: str = "llama3"
    """Chat template layout of the rendered /generate prompt (Template)."""
    replay: str = "recorded"
    """History of later rounds: the trace's replies (`recorded`, the same contexts for every
    variant) or the server's own (`live`) (Replay)."""
    max_turns: int | None = None
    """Replay at most this many rounds of each conversation (None = all)."""
    num_conversations: int | None = None
    """Read and replay only the first this many conversations (None = all)."""
    think_time: str = "none"
    """Think time between rounds: trace | none | constant | exponential (ThinkTime)."""
    think_time_s: float = 0.0
    """Constant think time, or the mean of the exponential one (s)."""
    time_scale: float = 1.0
    """load.arrival=trace: multiplier of the trace's arrival offsets (0.5 = twice as fast)."""


@dataclass
class LoadConfig:
    concurrency: int | None = 1
    """Closed loop: requests in flight (ignored by open-loop rate cells: see max_in_flight)."""
    rate: float | None = None
    """Open loop: mean arrivals per second on a precomputed schedule (None = closed loop)."""
    max_in_flight: int | None = None
    """Open loop: at most this many requests in flight (None = unbounded)."""
    arrival: str = "poisson"
    """Open-loop arrival process (Arrival; `trace` = the trace's own arrival times, for
    workload.kind=conversations)."""
    burstiness: float = 1.0
    """Gamma shape for arrival=gamma; 1.0 is Poisson, below 1 burstier."""
    num_requests: int | None = None
    """Measured requests per cell; None = max(min_requests, requests_per_stream x concurrency)."""
    requests_per_stream: float = 4.0
    """Requests per concurrent stream when num_requests is None (>= 4 leaves a steady-state
    window of >= 3 requests per stream after ramp-up and drain)."""
    min_requests: int = 8
    """Floor on measured requests per cell; with a target, no precision check before this
    many have finished."""
    duration_s: float | None = None
    """Bound the load window by time too (whichever ends first; with a target, its time cap)."""
    target: Any = None
    """Precision target: {metric: output_tok_s, half_width: 0.05} (±5 %) or a list of them
    (all must hold; metrics output_tok_s, req_s, <ttft|tpot|e2e>_p<q>): the cell stops issuing
    once its steady window's 95 % interval is that tight (docs/loadgen.md, "Precision
    targets"). Typed Any so that a command-line mapping works; checked by
    grid/plan/stopping.py."""
    max_requests: int | None = None
    """With a target: the cap on measured requests (None = 4 x the count without a target)."""
    check_interval_s: float = 0.5
    """Seconds between the load generator's mid-cell checks (target, over-saturation)."""
    stop_over_saturated: bool = True
    """Stop a cell whose server cannot keep up (TTFT rising at a fixed concurrency, a backlog
    growing at a rate; specgrid_metrics/saturation.py) and mark it `over_saturated`."""
    warmup_requests: int = 2
    """Requests sent first and excluded from results."""
    request_timeout_s: float = 300.0
    """A request taking longer is an error row (catches hung servers)."""
    clients: int = 1
    """LoadGenActors sharing one cell's load."""
    client_cpus: float = 1.0
    """CPUs each LoadGenActor reserves on its server's node (its event loop needs a core)."""
    seed: int = 0
    """Seeds prompt order and arrival schedules."""
    repeat: int = 0
    """Repeat index: `grid.axes.repeat=[0,1,2]` measures the same cell again under distinct
    cell ids (part of the cell identity; nothing else changes)."""
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
class SearchConfig:
    """A question instead of a listed load axis (docs/questions.md): the keys every question
    reads. Each question's own keys live in its folder (grid/questions/<kind>/keys.py) and
    join this schema through the registry (`register_configs(keys)`)."""

    kind: str | None = None
    """None (off: the grid is the axes) or the question asked: `speculation` or `capacity`
    (grid/questions/ REGISTRY, docs/questions.md)."""
    concurrency: list[int] = field(default_factory=lambda: [1, 256])
    """[lowest, highest] concurrency the question may measure (closed loop only)."""
    resolution: float = 1.4142135623730951
    """Factor between neighbouring loads of the question's lattice (√2: 1 2 3 4 6 8 11 16 ...)."""
    max_cells: int = 24
    """Cell budget of the question (every variant's cells counted)."""
    coarse_levels: int = 5
    """Log-spaced levels measured first, range ends included (1 4 16 64 256 for [1, 256])."""


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
    max_parallel_servers: int = 1
    """Server groups run at once, each on its own GPUs (1: no neighbour disturbs a cell)."""
    exclusive_node: bool = True
    """One server per node: a server reserves all GPUs of its node (it still uses tp_size of
    them). False packs servers on GPU subsets of one node (two TP4 servers on an 8-GPU node)."""
    search: SearchConfig = field(default_factory=SearchConfig)
    """An adaptive search: a question chooses the cells (grid/questions/)."""


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
    max_server_starts: int = 2
    """Consecutive failed starts of a group's server after which its remaining cells fail."""
    cell_timeout_s: float | None = None
    """A cap on each cell's load (warm-up and window): past it the cell fails even while it
    makes progress. None = bounded by its progress only (docs/runs.md, grid/execute/stall.py)."""
    call_timeout_s: float = 60.0
    """The most the driver waits for one call to a server's or telemetry actor around a cell:
    past it that cell fails, naming the call, and the server is replaced (docs/runs.md)."""
    sim_time_scale: float | None = None
    """The simulator's `time_scale` for this run (conf/engine/sim.yaml reads it; a real engine
    ignores it): figures on its modelled clock (docs/loadgen.md "The modelled clock")."""
    metrics_interval_s: float | None = 1.0
    """Sample the server's /metrics this often during a cell into server_metrics/ (None = off)."""
    telemetry_interval_s: float | None = 1.0
    """Sample the node's GPUs through NVML this often during a cell into telemetry/ (None =
    off)."""


@dataclass
class SloConfig:
    """Latency objectives for goodput (SGLang's rule: a request counts when it succeeded and
    met every SLO that is set; grid/analysis/goodput.py)."""

    ttft_ms: float | None = 2000.0
    """Time to first token, milliseconds (None = not checked)."""
    tpot_ms: float | None = 100.0
    """Time per output token after the first, milliseconds (None = not checked)."""
    e2e_ms: float | None = None
    """End-to-end request latency, milliseconds (None = not checked)."""


@dataclass
class ClusterConfig:
    kind: str = "local"
    """One of ClusterKind. local: start a private Ray instance on this machine, never joining
    a running cluster; ray: join the running Ray cluster at `address` (docs/cluster.md)."""
    address: str | None = None
    """The Ray cluster to join (cluster=ray): `auto` (found through RAY_ADDRESS or the node's
    running Ray) or `host:port` of its head; must be unset for cluster=local."""
    num_gpus: int | None = None
    """GPUs of a local cluster; None = the GPUs found (logical GPUs: 8 for the simulator)."""
    num_cpus: int | None = None
    """CPUs of a local cluster; None = Ray's default."""


@dataclass
class SpecgridConfig:
    engine: EngineConfig = field(default_factory=EngineConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    variant: VariantConfig = field(default_factory=VariantConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    grid: GridAxes = field(default_factory=GridAxes)
    run: RunConfig = field(default_factory=RunConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    slo: SloConfig = field(default_factory=SloConfig)
    sweep: str = "single"
    """Sweep name (set by sweep/*.yaml); part of the default run id."""
    results_dir: str = "results"
    """Where run folders go (relative to the working directory)."""
    plan: bool = False
    """Print the plan (cells, servers, commands, GPUs, estimate) and exit."""


def register_configs(keys: Sequence[type]) -> None:
    """The root schema; config.yaml lists it first, so every group merged into it is typed;
    `grid.search` takes the questions' own keys besides SearchConfig's (`keys`: one dataclass
    per question, grid/questions `schema_keys`).
    And the `${tiny_model:NAME}` and `${trained_model:NAME}` resolvers: the folder of one of
    the project's tiny models for the current recipe (engines/tiny_models.py,
    conf/model/tiny.yaml; engines/trained_models.py, conf/model/tiny_trained.yaml)."""
    schema = OmegaConf.structured(SpecgridConfig)
    if keys:
        search = make_dataclass("SearchConfig", [], bases=(*keys, SearchConfig))
        schema.grid.search = OmegaConf.structured(search)
    ConfigStore.instance().store(name="specgrid_schema", node=schema)
    if not OmegaConf.has_resolver("tiny_model"):
        OmegaConf.register_new_resolver("tiny_model", _tiny_model)
    if not OmegaConf.has_resolver("trained_model"):
        OmegaConf.register_new_resolver("trained_model", _trained_model)


def _tiny_model(name: str) -> str:
    from engines.tiny_models import model_dir

    return str(model_dir(name))


def _trained_model(name: str) -> str:
    from engines.trained_models import model_dir

    return str(model_dir(name))
