"""Cell expansion: the sweep's axes -> cells, each with a stable id, grouped by server.

Pure: no Hydra, no Ray, no files. `expand_axes` makes the axis combinations; the caller
composes one resolved config per combination (`axis_overrides` gives the Hydra overrides) and
`make_cell` turns it into a Cell. A cell id is a hash of what the cell measures (engine and its
detected version, model and draft paths and revisions, variant, the prompts' content, load) —
never timeouts, interpreter paths or timestamps — so the same cell has the same id in every run
and a changed cell gets a new one."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.forced import FORCED_LABEL
from grid.analysis.setups import SEP, join

GROUP_AXES = ("variant", "workload", "model", "engine")
"""Axes whose values name a config option (conf/<axis>/<value>.yaml)."""
KEY_ALIASES = {"concurrency": "load.concurrency", "rate": "load.rate", "repeat": "load.repeat"}
"""Short axis names for load settings."""

# Fields that change how a run is operated, not what a cell measures.
_NOT_IDENTITY = {
    "engine": ("python", "validate_python", "ready_timeout_s", "stop_timeout_s", "host",
               "api_key"),
    "load": ("request_timeout_s", "client_cpus"),
    "hardware": ("gpu_hour_usd",),  # a price the report uses, not what is measured
}


def unmeasured_key(key: str) -> bool:
    """A config key that is neither part of a cell's identity nor read into it some other way
    (`engine.python` is: the engine version it reports is part of the identity). Such a key
    cannot be a grid axis: its cells would share one id and collapse into one."""
    section, _, name = key.partition(".")
    return name != "python" and name in _NOT_IDENTITY.get(section, ())


TARGET_CAP_FACTOR = 4
"""Without load.max_requests, a cell with a precision target (load.target, grid/plan/stopping.py)
may measure this many times the requests it would measure without one."""

# Load keys left out of a cell's identity while they hold their default, so that cells planned
# before the keys existed keep their ids (grid/plan/stopping.py).
_DEFAULT_FREE = {"target": None, "max_requests": None, "check_interval_s": 0.5,
                 "stop_over_saturated": True}

# Shorter labels for variant factors that appear in variant names.
_FACTOR_ABBREV = {"speculative_disable_above_batch": "off_above", "speculative_depth": "depth",
                  "speculative_adaptive": "adaptive", "forced_acceptance.length": "forced_len",
                  "forced_acceptance.rates": "forced_rates",
                  "args.speculative_draft_model_path": "draft"}

UNSET_UNLESS_GIVEN = ("speculative_depth", "speculative_adaptive", "speculative_adaptive_config")
"""Variant keys that leave a cell's identity when unset (None or False), so cells composed
before the keys existed keep their ids and server keys; `forced_acceptance` too while it
forces nothing (neither length nor rates)."""


def _variant_identity(variant: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in variant.items()
            if not (k in UNSET_UNLESS_GIVEN and v in (None, False))
            and not (k == "forced_acceptance" and not any(dict(v or {}).values()))}


def stable_hash(obj: Any, length: int = 16) -> str:
    """sha256 of canonical JSON (sorted keys): equal for equal content, whatever the key order."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def axis_key(axis: str) -> str:
    """The config key an axis sets (`concurrency` -> `load.concurrency`)."""
    return KEY_ALIASES.get(axis, axis)


def expand_axes(
    axes: Mapping[str, Sequence[Any]],
    include: Iterable[Mapping[str, Any]] = (),
    exclude: Iterable[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Cartesian product of the axes (in the order given), minus excluded, plus included.

    An exclude rule drops a combination that matches every key of the rule (a rule value may
    be a list of values). Included combinations are appended unless already present."""
    names = list(axes)
    for name in names:
        values = axes[name]
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise ValueError(f"grid.axes.{name} must be a list, got {values!r}")
        if len(values) == 0:
            raise ValueError(f"grid.axes.{name} is empty: the grid has no cells")
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(
        *(axes[n] for n in names))]
    rules = [dict(rule) for rule in exclude]
    combos = [c for c in combos if not any(_matches(c, rule) for rule in rules)]
    for extra in include:
        extra = dict(extra)
        if extra not in combos:
            combos.append(extra)
    return combos


def _matches(combo: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    for key, wanted in rule.items():
        if key not in combo:
            return False
        options = wanted if isinstance(wanted, list | tuple) else [wanted]
        if combo[key] not in options:
            return False
    return True


def axis_overrides(combo: Mapping[str, Any]) -> list[str]:
    """Hydra overrides that select one combination: `variant=eagle3`, `++load.concurrency=8`."""
    out = []
    for axis, value in combo.items():
        if axis in GROUP_AXES:
            out.append(f"{axis}={value}")
        else:
            out.append(f"++{axis_key(axis)}={_hydra_value(value)}")
    return out


def _hydra_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def requests_for_cell(load: Mapping[str, Any]) -> int:
    """Measured requests of a cell: num_requests if set, else requests_per_stream per stream
    (arrivals per second for an open-loop cell, else concurrency), at least min_requests; with
    a precision target, its cap (grid/plan/stopping.py)."""
    if load.get("num_requests") is not None:
        return int(load["num_requests"])
    streams = load["rate"] if load.get("rate") is not None else load.get("concurrency") or 1
    fixed = max(int(load["min_requests"]), math.ceil(load["requests_per_stream"] * streams))
    if load.get("target") is None:
        return fixed
    cap = load.get("max_requests")
    return int(cap) if cap is not None else TARGET_CAP_FACTOR * fixed


SETUP_AXES = ("engine", "model", "engine.options.hardware")
"""Axes the report names as a cell's setup, ahead of its variant (grid/analysis/setups.py):
`describe` shows them the same way; the labels leave them out."""
_LOAD_SHOWN = ("load.concurrency", "load.rate", "load.repeat")
"""Load axes the load and repeat columns show: no label part."""


def variant_label(name: str, combo: Mapping[str, Any]) -> str:
    """The variant's name plus the variant factors this cell sets, as a path-safe slug:
    `eagle3` with `variant.speculative_disable_above_batch=16` -> `eagle3__off_above-16`."""
    return "__".join([_slug(name), *_factor_parts(("variant.",), combo)])


def _factor_parts(sections: tuple[str, ...], combo: Mapping[str, Any]) -> list[str]:
    """`leaf-value` slugs of the combo's axes under `sections` (`variant.`, `workload.`), in
    axis order, but for the setup's and the shown load's; an absolute path stands by its last
    part (a draft model's folder `.../ladder/noise-0.20` -> `draft-noise-0.20`), so a label
    does not change from one machine's cache to another's."""
    parts = []
    for axis, value in combo.items():
        section = next((s for s in sections if axis.startswith(s)), None)
        if section is None or value is None or axis in SETUP_AXES \
                or axis_key(axis) in _LOAD_SHOWN:
            continue
        leaf = axis.rsplit(".", 1)[-1]
        name = _FACTOR_ABBREV.get(axis[len(section):], _FACTOR_ABBREV.get(leaf, leaf))
        if isinstance(value, str) and value.startswith("/"):
            value = value.rstrip("/").rsplit("/", 1)[-1]
        parts.append(f"{name.lower()}-{_slug(value)}")
    return parts


def workload_label(name: str, combo: Mapping[str, Any]) -> str:
    """The workload's name plus the workload, engine, model and load factors this cell sets
    (`coding__temperature-0.7`, `coding__hang_after_requests-20`): cells that differ only in
    such a setting are distinct in every table, figure and progress line, and each variant is
    compared with the baseline of its own setting (comparisons pair one workload label)."""
    parts = _factor_parts(("workload.", "engine.", "model.", "load."), combo)
    return "__".join([_slug(name), *parts]) if parts else name


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "none"


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a server configuration under one load and workload."""

    cell_id: str
    server_key: str
    variant: str
    """Variant label (name plus the variant factors of this cell)."""
    workload: str
    """Workload label (name plus the workload factors of this cell, workload_label)."""
    concurrency: int | None
    """Closed loop: requests in flight (None for an open-loop rate cell)."""
    rate: float | None
    """Open loop: mean arrivals per second (None for a closed-loop cell)."""
    num_requests: int
    tp_size: int
    factors: dict[str, Any]
    """The axis values that define this cell (axis -> value)."""
    config: dict[str, Any] = field(repr=False)
    """The resolved config (plain containers)."""
    prompts_digest: str = ""
    """sha256 of the prompts' content (part of the identity)."""
    engine_version: str | None = None
    """The engine's detected version (part of the identity; see grid.plan.specs.engine_version)."""
    max_in_flight: int | None = None
    """Open loop: cap on requests in flight (None = unbounded)."""

    @property
    def repeat(self) -> int:
        """Its repeat index (`load.repeat`; 0 without the axis)."""
        return int((self.config.get("load") or {}).get("repeat") or 0)

    def with_engine_version(self, version: str | None) -> Cell:
        """The same cell measured on engine `version`: a new id and server key."""
        return make_cell(self.factors, self.config, self.prompts_digest, version)

    @property
    def workload_name(self) -> str:
        """The workload config's name: the key of its prompt or conversation set."""
        return str(self.config["workload"]["name"])

    @property
    def setup(self) -> str:
        """The values of the setup axes it has (SETUP_AXES: `vllm_cpu · tiny`; '' without)."""
        return SEP.join(str(self.factors[a]) for a in SETUP_AXES if a in self.factors)

    def describe(self) -> str:
        """`eagle3 c=4 coding`, `baseline rate=5/s coding` (with `<=N in flight` if capped;
        `[forced acceptance: performance only]` after a forced cell), after its setup axes'
        values, joined as the report joins a setup (`vllm_cpu · eagle3 c=4 coding`)."""
        if self.rate is None:
            load = f"c={self.concurrency}"
        else:
            load = f"rate={self.rate:g}/s"
            if self.max_in_flight is not None:
                load += f" <={self.max_in_flight} in flight"
        forced = dict(self.config.get("variant", {}).get("forced_acceptance") or {})
        label = f" [{FORCED_LABEL}]" if any(forced.values()) else ""
        return f"{join(self.setup, self.variant)} {load} {self.workload}{label}"


def identity(config: Mapping[str, Any], prompts_digest: str,
             engine_version: str | None = None) -> dict[str, Any]:
    """What a cell measures. The prompt file's path is replaced by a digest of its content;
    the engine carries its detected version; load settings the cell's loop does not use
    (concurrency for an open-loop cell; the arrival law and in-flight cap for a closed one)
    are left out."""
    ident: dict[str, Any] = {}
    for part in ("engine", "model", "variant", "workload", "load"):
        node = _variant_identity(config[part]) if part == "variant" else dict(config[part])
        for drop in _NOT_IDENTITY.get(part, ()):
            node.pop(drop, None)
        ident[part] = node
    ident["workload"]["prompts"] = prompts_digest
    ident["engine"]["version"] = engine_version
    unused = (("concurrency",) if config["load"].get("rate") is not None
              else ("max_in_flight", "arrival", "burstiness"))
    for key in unused:
        ident["load"].pop(key, None)
    for key, default in _DEFAULT_FREE.items():
        if ident["load"].get(key, default) == default:
            ident["load"].pop(key, None)
    return ident


def engine_identity(engine: Mapping[str, Any]) -> dict[str, Any]:
    """The engine settings that change what is measured (not paths, timeouts or secrets)."""
    return {k: v for k, v in engine.items() if k not in _NOT_IDENTITY["engine"]}


def server_identity(config: Mapping[str, Any], engine_version: str | None = None
                    ) -> dict[str, Any]:
    """Everything that needs a distinct server process (not the variant's label)."""
    variant = {k: v for k, v in _variant_identity(config["variant"]).items() if k != "name"}
    variant["tp_size"] = resolved_tp_size(config)
    engine = {**engine_identity(config["engine"]), "version": engine_version}
    return {"engine": engine, "model": dict(config["model"]), "variant": variant}


def resolved_tp_size(config: Mapping[str, Any]) -> int:
    tp = config["variant"].get("tp_size")
    return int(tp if tp is not None else config["model"]["tp_size"])


def make_cell(combo: Mapping[str, Any], config: Mapping[str, Any], prompts_digest: str,
              engine_version: str | None = None) -> Cell:
    load = config["load"]
    open_loop = load.get("rate") is not None
    return Cell(
        cell_id=stable_hash(identity(config, prompts_digest, engine_version)),
        server_key=stable_hash(server_identity(config, engine_version)),
        variant=variant_label(config["variant"]["name"], combo),
        workload=workload_label(str(config["workload"]["name"]), combo),
        concurrency=None if open_loop else load.get("concurrency"),
        rate=load.get("rate"),
        num_requests=requests_for_cell(load),
        tp_size=resolved_tp_size(config),
        factors=dict(combo),
        config=dict(config),
        prompts_digest=prompts_digest,
        engine_version=engine_version,
        max_in_flight=load.get("max_in_flight") if open_loop else None,
    )


@dataclass(frozen=True)
class ServerGroup:
    """Cells that share one server process, in grid order: one server configuration at one
    repeat (each repeat of a configuration is a fresh server start)."""

    server_key: str
    cells: tuple[Cell, ...]
    repeat: int = 0
    """The repeat its cells measure (`load.repeat`)."""
    labelled: bool = False
    """The cells grouped with it hold a repeat other than 0: its label names its repeat."""

    @property
    def key(self) -> str:
        """This server start among the run's: the server key and the repeat."""
        return f"{self.server_key}-r{self.repeat}"

    @property
    def config(self) -> dict[str, Any]:
        return self.cells[0].config

    @property
    def tp_size(self) -> int:
        return self.cells[0].tp_size

    @property
    def variant(self) -> str:
        return self.cells[0].variant

    @property
    def label(self) -> str:
        """`eagle3`, or `eagle3 repeat 1` where the grouped cells hold repeats; after its setup
        (`vllm_cpu · eagle3`) and with the engine and model settings its cells' workload labels
        name (`eagle3 hang_after_requests-20`) where the grid sweeps them."""
        cell = self.cells[0]
        settings = _factor_parts(("engine.", "model."), cell.factors)
        name = " ".join([join(cell.setup, self.variant), *settings])
        return f"{name} repeat {self.repeat}" if self.labelled else name

    @property
    def start_seed(self) -> int:
        """A seed of its own per server configuration and repeat, the same in every rerun:
        what the server draws once per start (the simulator's speed_jitter) differs from one
        repeat to the next and is reproducible (a 32-bit value: 8 hex digits)."""
        return int(stable_hash({"server": self.server_key, "repeat": self.repeat}, 8), 16)


def group_by_server(cells: Sequence[Cell]) -> list[ServerGroup]:
    """One group per server configuration and repeat, so that each repeat measures a fresh
    server. Repeat r's groups run after repeat r-1's, in the configurations' order of first
    appearance for an even r and in the reverse order for an odd r (repeat 0: A B C, repeat
    1: C B A, repeat 2: A B C), so that what drifts during a run falls on every configuration
    alike. Within a group, cells keep grid order."""
    order: dict[str, None] = {}
    members: dict[tuple[int, str], list[Cell]] = {}
    for cell in cells:
        order.setdefault(cell.server_key, None)
        members.setdefault((cell.repeat, cell.server_key), []).append(cell)
    repeats = sorted({repeat for repeat, _ in members})
    labelled = repeats != [0]
    groups = []
    for repeat in repeats:
        keys = [key for key in order if (repeat, key) in members]
        for key in reversed(keys) if repeat % 2 else keys:
            groups.append(ServerGroup(key, tuple(members[(repeat, key)]), repeat, labelled))
    return groups


def start_order(groups: Sequence[ServerGroup]) -> str:
    """The plan's line on the order of the server starts where the cells hold repeats:
    `server order (a fresh server per repeat): repeat 0: baseline, eagle3; repeat 1: eagle3,
    baseline`."""
    by_repeat: dict[int, list[str]] = {}
    for group in groups:
        by_repeat.setdefault(group.repeat, []).append(group.variant)
    return "server order (a fresh server per repeat, the order reversed every other repeat): " \
        + "; ".join(f"repeat {r}: {', '.join(names)}" for r, names in by_repeat.items())


def one_per_server(groups: Sequence[ServerGroup]) -> list[ServerGroup]:
    """The first group of each server configuration (what is checked and launched once for
    all of its repeats), in order."""
    first: dict[str, ServerGroup] = {}
    for group in groups:
        first.setdefault(group.server_key, group)
    return list(first.values())


def dedupe(cells: Iterable[Cell]) -> list[Cell]:
    """Drop repeated cell ids (two axis combinations that resolve to the same cell)."""
    seen: set[str] = set()
    out = []
    for cell in cells:
        if cell.cell_id not in seen:
            seen.add(cell.cell_id)
            out.append(cell)
    return out
