"""Simulator profiles: one JSON file for the server's behaviour, plus a hardware profile and a
model profile that give the roofline its numbers (engines/sim/roofline.py).

``--sim-profile NAME`` loads ``engines/sim/profiles/NAME.json`` (or a file path): the sampling,
server defaults, speculative algorithms and the calibration scenario, and which hardware and
model it stands for. ``--sim-hardware NAME`` / ``--sim-model NAME`` swap in
``profiles/hardware/NAME.json`` / ``profiles/model/NAME.json``. A model profile may carry
efficiency factors fitted for one hardware (``efficiency_on``); otherwise the hardware
profile's own factors apply. docs/simulator.md documents every number and where it comes from,
including the two published anchors and the fitted factors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from engines.sim.drafter import ContextDecay
from engines.sim.model import nccl_multiplier
from engines.sim.roofline import Efficiency, Hardware, Model, Roofline

PROFILE_DIR = Path(__file__).parent / "profiles"

_REQUIRED = ("name", "hardware", "model", "algorithms", "sampling", "server")
HARDWARE_DIR = PROFILE_DIR / "hardware"
MODEL_DIR = PROFILE_DIR / "model"


def _span(r: tuple[int, int]) -> str:
    return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"


@dataclass(frozen=True)
class Envelope:
    """The scenarios a hardware x model pair's anchor covers (engines/sim/calibrate.py runs
    exactly these): the range in which the simulator's numbers were checked against a
    published measurement. Anything outside is extrapolation of the roofline. Stored next to
    the anchor it comes from (profiles/default.json ``calibration.envelope``, a model
    profile's ``anchor.envelope``)."""

    anchor: str
    """The anchor's name (``python -m engines.sim.calibrate --anchor NAME``)."""
    hardware: str
    """The hardware profile the anchor was measured on."""
    model: str
    """The model profile the anchor was measured with."""
    concurrency: tuple[int, int]
    """Streams in flight (closed loop) the anchor's figures cover, lowest and highest."""
    prompt_tokens: tuple[int, int]
    """Prompt length in tokens (characters / 4, calibrate.py's rule) the anchor's prompts
    have, shortest and longest."""
    output_tokens: tuple[int, int]
    """Output tokens per request (max_new_tokens with ignore_eos), fewest and most."""
    domain: str
    """The prompts' domain in calibrate.py (``coding`` or ``general`` = MT-bench-like chat)."""
    workload_domains: tuple[str, ...]
    """The prompt-file domain labels (workloads/prompts/*.jsonl ``domain``) that count as that
    domain: a speculative cell's acceptance is only checked on these."""
    speculative: tuple[tuple[int, int, int], ...]
    """The EAGLE-3 shapes the anchor measured, as (num_steps, eagle_topk, num_draft_tokens);
    other algorithms and shapes are extrapolation."""
    note: str = ""
    """What the anchor says that the simulator does not reproduce (docs/simulator.md)."""
    algorithms: tuple[str, ...] = ("EAGLE3",)
    """The speculative algorithms (SGLang's names) the anchor measured; others are
    extrapolation."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Envelope:
        def pair(key: str) -> tuple[int, int]:
            lo, hi = (int(v) for v in data[key])
            if not 1 <= lo <= hi:
                raise ValueError(f"envelope {key} must be [lo, hi] with 1 <= lo <= hi, "
                                 f"got {data[key]!r}")
            return lo, hi

        spec = tuple((int(s), int(k), int(d)) for s, k, d in data["speculative"])
        return cls(anchor=str(data["anchor"]), hardware=str(data["hardware"]),
                   model=str(data["model"]), concurrency=pair("concurrency"),
                   prompt_tokens=pair("prompt_tokens"), output_tokens=pair("output_tokens"),
                   domain=str(data["domain"]),
                   workload_domains=tuple(str(d) for d in data["workload_domains"]),
                   speculative=spec, note=str(data.get("note", "")),
                   algorithms=tuple(str(a) for a in data.get("algorithms", ("EAGLE3",))))

    def describe(self) -> str:
        """One line: the anchor and the ranges it covers."""
        span = _span
        shapes = ", ".join(f"{s}/{k}/{d}" for s, k, d in self.speculative)
        return (f"anchor {self.anchor} ({self.hardware} / {self.model}): concurrency "
                f"{span(self.concurrency)}, prompts {span(self.prompt_tokens)} tokens, "
                f"{span(self.output_tokens)} output tokens, {self.domain} prompts "
                f"(workload domains {', '.join(self.workload_domains)}), "
                f"{'/'.join(self.algorithms)} {shapes}")

    def outside(self, *, concurrency: float | None, output_tokens: int | None,
                prompt_tokens: tuple[int, int] | None, speculative: tuple[int, int, int] | None,
                domains: Sequence[str] = ()) -> list[str]:
        """Why a cell lies outside the envelope (empty: inside). ``concurrency`` is the streams
        (or a rate's implied batch), ``prompt_tokens`` the cell's (shortest, longest) prompt,
        ``speculative`` its EAGLE-3 shape (None: no speculation), ``domains`` its prompts'
        labels (checked for speculative cells only: acceptance depends on them)."""
        out = []
        lo, hi = self.concurrency
        if concurrency is not None and not lo <= concurrency <= hi:
            out.append(f"concurrency {concurrency:g} outside {_span(self.concurrency)}")
        lo, hi = self.output_tokens
        if output_tokens is not None and not lo <= output_tokens <= hi:
            out.append(f"{output_tokens} output tokens outside {_span(self.output_tokens)}")
        lo, hi = self.prompt_tokens
        if prompt_tokens is not None and (prompt_tokens[0] < lo or prompt_tokens[1] > hi):
            out.append(f"prompts of {_span(prompt_tokens)} tokens outside "
                       f"{_span(self.prompt_tokens)}")
        if speculative is not None:
            if speculative not in self.speculative:
                out.append("speculative shape {}/{}/{} not among {}".format(
                    *speculative, ", ".join(f"{s}/{k}/{d}" for s, k, d in self.speculative)))
            off = sorted(set(domains) - set(self.workload_domains))
            if off:
                out.append(f"prompt domains {', '.join(off)} (anchor: "
                           f"{', '.join(self.workload_domains)})")
        return out


@dataclass(frozen=True)
class Profile:
    """A loaded profile: the raw JSON plus typed accessors used by the server."""

    data: Mapping[str, Any]
    path: Path
    hardware_data: Mapping[str, Any]
    """profiles/hardware/<name>.json"""
    model_data: Mapping[str, Any]
    """profiles/model/<name>.json"""

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def hardware(self) -> Hardware:
        """The hardware, with the model's fitted efficiency for it when the model has one."""
        hw = Hardware.from_mapping(self.hardware_data)
        fitted = self.model_data.get("efficiency_on", {}).get(hw.name)
        if fitted:
            hw = replace(hw, efficiency=Efficiency.from_mapping(
                {**asdict(hw.efficiency), **fitted}))
        return hw

    def roofline(self, tp_size: int, env: Mapping[str, str],
                 flags: Mapping[str, Any]) -> tuple[Roofline, dict[str, Any]]:
        """The roofline for a server with ``--tp-size tp_size``, its environment and extra
        flags, and a record of what was applied (/server_info's ``sim.hardware``). A model
        profile with ``node_tp`` stands for that many GPUs whatever --tp-size says."""
        model = self.model_spec
        tp = model.node_tp or max(1, tp_size)
        mult, applied = nccl_multiplier(self.comm_multipliers, env, flags)
        force_nccl = bool(flags.get("disable_custom_all_reduce"))
        rl = Roofline(self.hardware, model, tp=tp, nccl_multiplier=mult, force_nccl=force_nccl)
        return rl, {"hardware": rl.hw.name, "model": model.name, "tp": tp,
                    "tp_size_flag": tp_size, "interconnect": rl.hw.interconnect.kind,
                    "custom_allreduce": (not force_nccl
                                         and rl.hw.interconnect.custom_allreduce(tp)),
                    "nccl_multiplier": round(mult, 6), "applied": applied,
                    "efficiency": asdict(rl.hw.efficiency)}

    @property
    def model_spec(self) -> Model:
        return Model.from_mapping(self.model_data)

    @property
    def comm_multipliers(self) -> Mapping[str, Any]:
        return self.hardware_data.get("comm_multipliers", {})

    @property
    def acceptance(self) -> Mapping[str, list[float]]:
        """The drafter's per-domain chain acceptance (the model profile's)."""
        return self.model_data["acceptance"]

    @property
    def context_decay(self) -> ContextDecay | None:
        """How the drafter's acceptance falls with context length (the model profile's
        `drafter.train_context_tokens`, `context_decay_slope`, `context_floor`); None when the
        profile gives no training length."""
        return ContextDecay.from_profile(self.model_data.get("drafter", {}))

    @property
    def acceptance_by_domain(self) -> bool:
        """Whether a request's chain is the model profile's ``acceptance`` entry of its prompt's
        domain (a twin's fitted chains, docs/twin.md: ``drafter.acceptance_by: domain``)
        rather than the drafter's alignment with its training data."""
        return self.model_data.get("drafter", {}).get("acceptance_by") == "domain"

    @property
    def tree_second_guess(self) -> float:
        """The drafter's later guesses relative to its first (engines/sim/model.py
        ``tree_reach``); 1 when the model profile does not say."""
        return float(self.model_data.get("tree_second_guess", 1.0))

    @property
    def sampling(self) -> Mapping[str, Any]:
        return self.data["sampling"]

    @property
    def server(self) -> Mapping[str, Any]:
        return self.data["server"]

    def algorithm(self, name: str) -> Mapping[str, float]:
        """Acceptance and draft-cost factors for a speculative algorithm (``*`` = fallback)."""
        algos = self.data["algorithms"]
        fallback = algos.get("*", {"accept_scale": 1.0, "draft_cost_scale": 1.0})
        return algos.get(name.upper(), fallback)

    @property
    def envelope(self) -> Envelope | None:
        """The calibrated envelope of this profile's hardware x model pair: the default
        profile's ``calibration.envelope`` when the pair is its own, else the model profile's
        ``anchor.envelope`` when the anchor was measured on this hardware; None for a pair no
        anchor covers (every number it gives is extrapolation)."""
        hw, model = self.hardware_data.get("name"), self.model_data.get("name")
        for block in (self.data.get("calibration", {}), self.model_data.get("anchor", {})):
            env = block.get("envelope")
            if env and env.get("hardware") == hw and env.get("model") == model:
                return Envelope.from_mapping(env)
        return None

    def summary(self) -> dict[str, Any]:
        """What /server_info shows about the profile."""
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.data.get("description", ""),
            "sources": self.data.get("sources", {}),
            "calibration": self.data.get("calibration", {}),
            "hardware": self.hardware_data.get("name"),
            "model": self.model_data.get("name"),
            "efficiency": asdict(self.hardware.efficiency),
        }


def resolve_profile_path(name_or_path: str, directory: Path = PROFILE_DIR) -> Path:
    """``default`` -> the packaged profiles/default.json; anything with a separator or ending in
    .json is a file path."""
    if name_or_path.endswith(".json") or "/" in name_or_path:
        return Path(name_or_path)
    return directory / f"{name_or_path}.json"


def known(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.json"))


def _load_json(name: str, directory: Path, kind: str) -> tuple[Path, dict[str, Any]]:
    path = resolve_profile_path(name, directory)
    what = f"simulator {kind} profile" if kind else "simulator profile"
    if not path.is_file():
        raise ValueError(f"{what} {name!r} not found ({path}); known: {known(directory)}")
    try:
        return path, json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} {path}: {exc}") from exc


def gpu_memory_gib(hardware: str) -> float | None:
    """The memory of a modelled GPU kind (profiles/hardware/<name>.json), None if unknown."""
    try:
        _, hw = _load_json(hardware, HARDWARE_DIR, "hardware")
    except ValueError:
        return None
    memory = hw.get("memory_gib")
    return float(memory) if isinstance(memory, int | float) else None


def _inline(path: Path, data: Mapping[str, Any], kind: str, asked: str | None
            ) -> dict[str, Any] | None:
    """A profile's own hardware or model profile, when it carries one inline (a twin's fitted
    node, docs/twin.md) instead of naming a shipped one; ``asked`` (--sim-hardware /
    --sim-model) must then name that one: a twin is fitted to its node and model only."""
    inline = data[kind]
    if not isinstance(inline, Mapping):
        return None
    name = inline.get("name")
    if asked is not None and asked != name:
        raise ValueError(f"simulator profile {path} is fitted on {kind} {name!r}, not "
                         f"{asked!r}: run it with {kind}={name}")
    return dict(inline)


def twin_of(name_or_path: str) -> str | None:
    """The run a profile is a twin of (its ``twin.run_id``, docs/twin.md); None for a profile
    that is not a twin or cannot be read (loading it says why)."""
    path = resolve_profile_path(name_or_path)
    try:
        twin = json.loads(path.read_text()).get("twin") if path.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return str(twin["run_id"]) if isinstance(twin, dict) and twin.get("run_id") else None


def load_profile(name_or_path: str = "default", hardware: str | None = None,
                 model: str | None = None) -> Profile:
    """Load and check a profile (with ``hardware`` / ``model`` overriding the profile's own);
    ValueError with the reason when it is unusable."""
    path, data = _load_json(name_or_path, PROFILE_DIR, "")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"simulator profile {path} lacks {missing}")
    hw = _inline(path, data, "hardware", hardware)
    if hw is None:
        _, hw = _load_json(hardware or data["hardware"], HARDWARE_DIR, "hardware")
    if "efficiency_from" in hw:  # an unanchored GPU shares a sibling's fitted factors
        _, sibling = _load_json(hw["efficiency_from"], HARDWARE_DIR, "hardware")
        hw = {**hw, "efficiency": sibling["efficiency"]}
    md = _inline(path, data, "model", model)
    if md is None:
        _, md = _load_json(model or data["model"], MODEL_DIR, "model")
    if "general" not in md.get("acceptance", {}):
        raise ValueError(f"simulator model profile {md.get('name')}: acceptance needs a "
                         "'general' entry")
    prof = Profile(data=data, path=path.resolve(), hardware_data=hw, model_data=md)
    try:
        # each raises on bad fields
        prof.hardware, prof.model_spec, prof.context_decay, prof.envelope  # noqa: B018
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"simulator profile {path}: {exc!r}") from exc
    return prof
