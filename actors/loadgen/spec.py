"""What one load generator is asked to do (``LoadSpec``) and what it hands back (``LoadResult``).

Plain frozen dataclasses: no Ray, no sockets. ``LoadSpec`` validates itself on construction so a
bad cell fails before any request is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from actors.loadgen import schedule
from specgrid_metrics.precision import Target, normalize_metric

Endpoint = Literal["generate", "chat"]
"""``generate``: SGLang native ``POST /generate`` streaming; ``chat``: OpenAI
``POST /v1/chat/completions`` streaming with ``stream_options.include_usage``."""

Arrival = Literal["poisson", "gamma", "constant"]
"""Open-loop inter-arrival law: exponential, gamma with shape ``burstiness``, or fixed."""

TransportName = Literal["raw", "aiohttp", "httpx"]
"""Which httpx transport ``run_load`` builds when none is injected (recorded per cell;
actors/loadgen/transport.py ``make_transport``, docs/loadgen.md "HTTP clients")."""

ENDPOINTS: tuple[str, ...] = get_args(Endpoint)
ARRIVALS: tuple[str, ...] = get_args(Arrival)
TRANSPORTS: tuple[str, ...] = get_args(TransportName)


@dataclass(frozen=True)
class Prompt:
    """One prompt of a workload."""

    prompt_id: str
    text: str
    domain: str
    """Label from the workload file (coding, agentic, encyclopedic, ...)."""


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    """What every load one client drives has: the server and how it is reached, what each
    request asks for, and the open loop's rate and the time bound when set."""

    url: str
    """Server base URL."""
    endpoint: str = "generate"
    """``generate`` (SGLang native) or ``chat`` (OpenAI); see :data:`Endpoint`."""
    rate: float | None = None
    """Open loop: arrivals per second (requests, or conversations); None = closed loop."""
    burstiness: float = 1.0
    """Gamma shape of ``arrival="gamma"``."""
    duration_s: float | None = None
    """Stop issuing after this many seconds of the window (None: no time bound)."""
    clock_scale: float = 1.0
    """Wall seconds per second of the server's modelled clock (a simulator's
    ``time_scale``; 1 for a real server): every reported time is on the modelled clock and
    ``rate``, think times and ``duration_s`` are modelled seconds (actors/loadgen/timeline.py
    ``Clock``)."""
    max_new_tokens: int = 128
    temperature: float = 0.0
    ignore_eos: bool = True
    """Generate exactly ``max_new_tokens``."""
    request_timeout_s: float = 300.0
    """Whole-request limit."""
    connect_timeout_s: float = 10.0
    """TCP/TLS connect limit."""
    model: str = "default"
    """``model`` of chat requests."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token, when the server wants one (a secret: kept out of reprs)."""
    seed: int = 0
    """Seed of the schedule (arrivals, think times, prompt order)."""
    transport: str = "raw"
    """Transport built when none is injected (see :data:`TransportName`)."""
    tls_verify: bool = True
    """Check the server's TLS certificate and host name (https:// URLs)."""
    ca_bundle: str | None = None
    """PEM file of trusted CA certificates instead of the system's (https:// URLs)."""
    keepalive_s: float = 60.0
    """An idle keep-alive connection older than this is closed instead of reused."""

    def client_errors(self) -> list[str]:
        """What cannot be meant in the shared fields (a subclass adds its own)."""
        errors: list[str] = []
        if not self.url.startswith(("http://", "https://")):
            errors.append(f"url must start with http:// or https://, got {self.url!r}")
        errors += choice_errors(endpoint=(self.endpoint, ENDPOINTS),
                                transport=(self.transport, TRANSPORTS))
        if self.rate is not None and not self.rate > 0:
            errors.append(f"rate must be > 0 per second, got {self.rate}")
        if not self.burstiness > 0:
            errors.append(f"burstiness must be > 0, got {self.burstiness}")
        if not self.clock_scale > 0:
            errors.append(f"clock_scale must be > 0, got {self.clock_scale}")
        if self.duration_s is not None and not self.duration_s > 0:
            errors.append(f"duration_s must be > 0, got {self.duration_s}")
        if self.max_new_tokens < 1:
            errors.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.keepalive_s > 0:
            errors.append(f"keepalive_s must be > 0, got {self.keepalive_s}")
        if not self.request_timeout_s > 0 or not self.connect_timeout_s > 0:
            errors.append("request_timeout_s and connect_timeout_s must be > 0")
        return errors + api_key_errors(self.api_key)


@dataclass(frozen=True, kw_only=True)
class LoadSpec(ClientSpec):
    """The prompt load one client process drives against one server for one cell.

    Load shapes:

    * closed loop (``rate is None``): ``concurrency`` requests in flight (default 1); a finished
      request's slot immediately takes the next request.
    * open loop (``rate`` set): arrivals on a precomputed absolute schedule with mean ``rate``
      requests/s (``arrival`` law, ``burstiness`` = gamma shape), optionally capped at
      ``concurrency`` in flight (a capped arrival waits for a slot; its wait counts in dispatch
      lag).

    Bounds: ``num_requests`` measured requests and/or ``duration_s`` seconds of dispatching,
    whichever ends first; at least one must be set. In-flight requests are always drained
    (bounded by ``request_timeout_s``). ``warmup_requests`` run first, closed loop at this
    client's concurrency (an uncapped open-loop cell uses up to 8), all complete before the
    measured window opens, and produce no rows.

    Splitting a cell over ``num_clients`` processes: client ``client_index`` takes the
    concurrency share ``concurrency // N`` (+1 for the first ``concurrency % N``), the rate share
    ``rate / N`` and a deterministic disjoint subset of the cell's global request indices (see
    :mod:`actors.loadgen.schedule`); the union over clients is exactly the request set one
    client would send. ``start_at`` (epoch s) lets the clients of a split cell share one
    schedule origin.
    """

    prompts: tuple[Prompt, ...]
    concurrency: int | None = None
    arrival: str = "poisson"
    num_requests: int | None = 32
    warmup_requests: int = 0
    client_index: int = 0
    num_clients: int = 1
    start_at: float | None = None
    """Epoch s at which the measured phase starts (after warmup); None = as soon as ready. Set
    the same value on every client of a split open-loop cell so their schedules line up."""
    gc_freeze: bool = True
    """Keep Python's cyclic garbage collector out of the load window (freeze what exists,
    disable collection, collect after; see ``runner._GcFreeze``): its passes stall the event
    loop 1-30 ms (measured) and every chunk arriving meanwhile is stamped late."""
    # --- when the window stops early (actors/loadgen/stopping.py) -----------------------------
    targets: tuple[Target, ...] = ()
    """Precision targets: stop issuing once every one's interval is tight enough (then
    ``num_requests`` is the cap)."""
    min_requests: int = 0
    """With targets: no precision check before this many of this client's requests finished."""
    check_interval_s: float = 1.0
    """Seconds between two mid-window checks (targets, over-saturation)."""
    stop_over_saturated: bool = False
    """Stop issuing when the server is over-saturated (specgrid_metrics/saturation.py)."""
    extra_body: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Top-level keys merged into every request body (shallow: a ``sampling_params`` key here
    replaces the whole generated ``sampling_params``)."""

    def __post_init__(self) -> None:
        errors = self.client_errors()
        if not self.prompts:
            errors.append("prompts must not be empty")
        errors += choice_errors(arrival=(self.arrival, ARRIVALS))
        if self.concurrency is not None and self.concurrency < 1:
            errors.append(f"concurrency must be >= 1, got {self.concurrency}")
        if self.num_requests is None and self.duration_s is None:
            errors.append("set num_requests and/or duration_s: the load must be bounded")
        if self.num_requests is not None and self.num_requests < 0:
            errors.append(f"num_requests must be >= 0, got {self.num_requests}")
        if self.warmup_requests < 0:
            errors.append(f"warmup_requests must be >= 0, got {self.warmup_requests}")
        if self.num_clients < 1 or not 0 <= self.client_index < self.num_clients:
            errors.append(
                f"need 0 <= client_index < num_clients, got {self.client_index}/{self.num_clients}"
            )
        if (
            self.rate is not None
            and self.concurrency is not None
            and self.concurrency < self.num_clients
        ):
            errors.append(
                f"open loop capped at concurrency {self.concurrency} cannot be split over "
                f"{self.num_clients} clients (each needs a cap >= 1)"
            )
        errors += stop_errors(self.targets, self.min_requests, self.check_interval_s)
        if errors:
            raise ValueError("invalid LoadSpec: " + "; ".join(errors))

    # --- this client's share of a split cell ---------------------------------------------------
    @property
    def closed_loop(self) -> bool:
        return self.rate is None

    @property
    def cell_concurrency(self) -> int | None:
        """The cell's total concurrency (closed loop default 1; open loop None = uncapped)."""
        if self.concurrency is None and self.closed_loop:
            return 1
        return self.concurrency

    @property
    def my_concurrency(self) -> int | None:
        """This client's concurrency share (None = uncapped open loop)."""
        total = self.cell_concurrency
        if total is None:
            return None
        return share(total, self.num_clients, self.client_index)

    @property
    def my_rate(self) -> float | None:
        return None if self.rate is None else self.rate / self.num_clients

    def longest_wait_s(self) -> float:
        """The longest the cell's own schedule leaves all its clients with nothing to send: the
        widest gap between consecutive arrivals of its open-loop schedule (one schedule for
        the cell, shared by its clients), 0 in a closed loop (a finished request's slot takes
        the next request at once)."""
        if self.rate is None:
            return 0.0
        return schedule.longest_arrival_gap(self.num_requests, self.rate, self.arrival,
                                            self.burstiness, self.seed, self.duration_s)


def api_key_errors(api_key: str | None) -> list[str]:
    """The key is sent as ``Authorization: Bearer <key>``: visible ASCII only. A CR or LF would
    end the header inside the key (and the raw transport refuses the request), a character
    outside ASCII cannot be encoded (httpx raises building the request), so either would fail
    every request of every cell. The message never repeats the key (a secret)."""
    if api_key and not all("!" <= c <= "~" for c in api_key):
        return ["api_key must be visible ASCII characters only (no spaces, line breaks or "
                "other characters): it is sent in an HTTP header"]
    return []


def stop_errors(targets: tuple[Target, ...], min_requests: int, check_interval_s: float
                ) -> list[str]:
    """What cannot be meant in the early-stop settings."""
    errors = [f"target {t.metric!r}: unknown metric" for t in targets
              if normalize_metric(t.metric) != t.metric]
    errors += [f"target {t.metric}: half_width must be in (0, 1), got {t.half_width}"
               for t in targets if not 0 < t.half_width < 1]
    if min_requests < 0:
        errors.append(f"min_requests must be >= 0, got {min_requests}")
    if not check_interval_s > 0:
        errors.append(f"check_interval_s must be > 0, got {check_interval_s}")
    return errors


def choice_errors(**fields: tuple[str, tuple[str, ...]]) -> list[str]:
    """One message per field whose value is not among its choices: name=(value, choices)."""
    return [f"{name} must be one of {choices}, got {value!r}"
            for name, (value, choices) in fields.items() if value not in choices]


def share(total: int, parts: int, index: int) -> int:
    """``total // parts``, plus one for the first ``total % parts`` parts."""
    return total // parts + (1 if index < total % parts else 0)


@dataclass
class LoadResult:
    """What ``run_load`` returns: one row per measured request and the client's self-check."""

    rows: list[dict[str, Any]]
    stats: dict[str, Any]


ROW_KEYS: tuple[str, ...] = (
    "request_id",
    "prompt_id",
    "domain",
    "status",
    "error",
    "input_tokens",
    "output_tokens",
    "scheduled_at",
    "sent_at",
    "ttft_s",
    "e2e_s",
    "tpot_s",
    "itl_s",
    "accept_length",
    "spec_verify_ct",
    "finish_reason",
    "accept_length_decode",
    "accept_histogram",
    "chunk_offset_us",
    "chunk_tokens",
    "chunk_gap_s",
    "merged_reads",
    "server_queue_s",
    "server_ttft_s",
    "output_hash",
    "output_chars",
    "output_text",
)
"""Keys of every row, in order (grid.store.schema.REQUEST_FIELDS); what each holds:
docs/architecture.md ("requests columns")."""
