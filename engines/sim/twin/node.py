"""The node a twin is fitted to: the hardware profile (a shipped one, named) and the model's
shapes -- a shipped model profile, or one read from the served model's own ``config.json``
(a model no profile describes, such as the project's tiny and trained models), found from the
cells' server command (``--model`` / ``--model-path``) or given as a folder or file."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engines.launch import DRAFT_SHAPE_KEYS, SPEC_METHODS
from engines.sim.profile import HARDWARE_DIR, MODEL_DIR, PROFILE_DIR, Profile, known
from engines.sim.twin.cells import server_flags
from engines.twin_data import MeasuredCell

DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float": 4.0, "half": 2.0}
"""Bytes per parameter of a config's ``torch_dtype`` (or the server's ``--dtype``)."""
MODEL_FLAGS = ("--model", "--model-path")
"""vLLM's and SGLang's flag for the served model's folder."""
DRAFT_FLAGS = ("--speculative-draft-model-path",)
"""SGLang's flag for a separate draft model (vLLM's is the ``model`` of --speculative-config)."""


def params(config: Mapping[str, Any]) -> float:
    """Parameters of a dense Llama-style decoder from its config.json: embeddings, every
    layer's attention (q, k, v, o) and gated MLP (gate, up, down) and two norms, the final norm
    and the lm_head unless tied. Counted by hand: the driver carries no transformers (and a
    twin needs only the count, not the model); checked against the tiny models' recipe in
    tests/engines/sim/twin/test_node.py."""
    h = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv = int(config.get("num_key_value_heads") or heads)
    hd = int(config.get("head_dim") or h // heads)
    inter = int(config["intermediate_size"])
    vocab = int(config["vocab_size"])
    layers = int(config["num_hidden_layers"])
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    mlp = 3 * h * inter
    per_layer = attn + mlp + 2 * h
    head = 0 if config.get("tie_word_embeddings") else vocab * h
    return float(vocab * h + layers * per_layer + h + head)


def read_config(path: str | Path) -> dict[str, Any]:
    """A model's config.json (``path``: the file or the model folder); ValueError saying why
    when there is none or it is no dense decoder's."""
    p = Path(path)
    file = p / "config.json" if p.is_dir() else p
    if not file.is_file():
        raise ValueError(f"no config.json at {p}: name a shipped model profile (one of "
                         f"{', '.join(known(MODEL_DIR))}) or a model folder")
    try:
        config = json.loads(file.read_text())
    except ValueError as exc:
        raise ValueError(f"{file}: not JSON ({exc})") from None
    missing = [k for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                           "vocab_size", "num_hidden_layers") if k not in config]
    if missing or config.get("num_local_experts") or config.get("n_routed_experts"):
        raise ValueError(f"{file}: not a dense decoder's config (missing {missing})" if missing
                         else f"{file}: a mixture-of-experts config; use a shipped profile")
    return dict(config)


def model_from_config(name: str, config: Mapping[str, Any],
                      draft: Mapping[str, Any] | None, start: Mapping[str, Any],
                      dtype: str | None = None) -> dict[str, Any]:
    """A simulator model profile (engines/sim/profiles/model/*.json fields) of a served model
    from its config.json (and its draft model's), with the drafter's acceptance chains, context
    decay and tree factor of ``start`` (a shipped model profile's data): the twin fits the
    chains."""
    heads = int(config["num_attention_heads"])
    kind = str(dtype or config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    out: dict[str, Any] = {
        "name": name,
        "description": f"{name}: shapes from its config.json (a model no shipped profile "
                       "describes); drafter chains start from " f"{start.get('name')}'s.",
        "architectures": list(config.get("architectures") or []),
        "model_type": str(config.get("model_type", "")),
        "layers": int(config["num_hidden_layers"]),
        "hidden": int(config["hidden_size"]),
        "heads": heads,
        "kv_heads": int(config.get("num_key_value_heads") or heads),
        "head_dim": int(config.get("head_dim") or int(config["hidden_size"]) // heads),
        "dense_params_b": params(config) / 1e9,
        "weight_bytes": DTYPE_BYTES.get(kind, 2.0),
        "compute_dtype": "fp32" if DTYPE_BYTES.get(kind) == 4.0 else "bf16",
        "context_length": int(config.get("max_position_embeddings") or 4096),
        "draft_params_b": params(draft) / 1e9 if draft else 0.0,
        "draft_layers": int(draft["num_hidden_layers"]) if draft else 1,
    }
    for key in ("acceptance", "drafter", "tree_second_guess"):
        if key in start:
            out[key] = copy.deepcopy(start[key])
    return out


def drafter(cell: MeasuredCell) -> tuple[str, str] | None:
    """(method, draft model folder) a speculative cell's server drafts with, from its flags
    (SGLang's --speculative-algorithm / --speculative-draft-model-path, vLLM's
    --speculative-config method and model); None without one named."""
    flags = server_flags(cell.server_command)
    if flags.get("--speculative-algorithm"):
        return (flags["--speculative-algorithm"].upper(),
                next((flags[f] for f in DRAFT_FLAGS if flags.get(f)), ""))
    spec = flags.get("--speculative-config")
    if spec:
        try:
            value = json.loads(spec)
        except ValueError:
            return None
        if isinstance(value, dict):
            return str(value.get("method", "")), str(value.get("model", ""))
    return None


def algorithm(cell: MeasuredCell) -> str | None:
    """The speculative algorithm a cell's server drafts with, in the variants' names (SGLang's:
    vLLM's `draft_model` is STANDALONE); None without one named."""
    d = drafter(cell)
    if d is None:
        return None
    return _ALGORITHM_OF_METHOD.get(d[0], d[0].upper())


_ALGORITHM_OF_METHOD = {method: name for name, method in SPEC_METHODS.items()}
"""vLLM's speculative method -> the variants' algorithm name."""


def _served_paths(cells: Sequence[MeasuredCell]) -> tuple[str | None, str | None, str | None]:
    """(the served model's folder, a draft model's folder (`drafter`'s), --dtype) from the
    cells' commands."""
    model = draft = dtype = None
    for c in cells:
        flags = server_flags(c.server_command)
        model = model or next((flags[f] for f in MODEL_FLAGS if flags.get(f)), None)
        dtype = dtype or flags.get("--dtype") or None
        draft = draft or (drafter(c) or ("", ""))[1] or None
    return model, draft, dtype


def one_server_family(cells: Sequence[MeasuredCell]) -> None:
    """ValueError when the cells come from more than one engine or drafter: a twin is one
    server's model, with one drafter's acceptance per prompt domain. Drafters whose
    acceptance each cell knows (`known_acceptance`) may differ in quality, not in cost: their
    folders' shapes (layers, widths) must be equal."""
    kinds = sorted({c.engine for c in cells})
    if len(kinds) > 1:
        raise ValueError(f"cells of engines {', '.join(kinds)}: fit a twin to one engine's "
                         "cells at a time (--engine NAME)")
    drafters: dict[tuple[str, str], list[str]] = {}
    for c in cells:
        d = drafter(c)
        if d is not None and c.known_acceptance is None:
            drafters.setdefault(d, []).append(c.variant)
    if len(drafters) > 1:
        by = "; ".join(f"{'/'.join(sorted(set(v)))}: {m or '?'} {Path(p).name or ''}".strip()
                       for (m, p), v in sorted(drafters.items()))
        raise ValueError(f"cells of {len(drafters)} drafters ({by}): fit a twin to one "
                         "drafter's cells and the baseline (--variants baseline,NAME)")
    known: dict[str, str] = {}  # draft folder -> a variant drafting with it
    for c in cells:
        d = drafter(c)
        if d is not None and c.known_acceptance is not None and Path(d[1]).is_dir():
            known.setdefault(d[1], c.variant)
    shapes: dict[tuple[Any, ...], str] = {}
    for folder, variant in known.items():  # each folder's config.json read once
        config = read_config(folder)
        shapes.setdefault(tuple(config.get(k) for k in DRAFT_SHAPE_KEYS), variant)
    if len(shapes) > 1:
        raise ValueError(f"drafters of different shapes ({', '.join(sorted(shapes.values()))}):"
                         " a twin of known acceptance needs drafters of one cost per pass")


def names(cells: Sequence[MeasuredCell], hardware: str | None, model: str | None
          ) -> tuple[str | None, str | None]:
    """The hardware and model as given, else what the simulator's cells name in their engine
    version, else (the model) the model config's name."""
    if hardware is None:
        for c in cells:
            m = re.search(r" on (\S+) / ([^@\s]+)@", str(c.engine_version or ""))
            if m:
                hardware = hardware or m[1]
                model = model or m[2]
    if model is None:
        labels = sorted({c.model for c in cells})
        model = labels[0] if len(labels) == 1 else None
    return hardware, model


def node_data(cells: Sequence[MeasuredCell], hardware: str | None, model: str | None
              ) -> tuple[str, dict[str, Any] | str]:
    """(the hardware profile's name, the model: a shipped profile's name or a model profile
    built from config.json). ValueError naming the choices when neither is found: a model
    that is not shipped is read from ``model`` when it is a folder or file, else from the
    folder the cells' servers were started with."""
    hardware, model = names(cells, hardware, model)
    if hardware is None or hardware not in known(HARDWARE_DIR):
        raise ValueError(f"name the node's hardware profile with --hardware (one of "
                         f"{', '.join(known(HARDWARE_DIR))})" + (
                             f", not {hardware!r}" if hardware else ""))
    if model is not None and model in known(MODEL_DIR):
        return hardware, model
    served, draft, dtype = _served_paths(cells)
    source = model if model and ("/" in model or model.endswith(".json")) else served
    if source is None:
        raise ValueError(f"name the served model's profile (one of "
                         f"{', '.join(known(MODEL_DIR))}) or its folder with --model" + (
                             f"; {model!r} is neither" if model else ""))
    config = read_config(source)
    draft_config = read_config(draft) if draft and Path(draft).exists() else None
    label = model if model and source != model else Path(source).name
    start = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
    return hardware, model_from_config(label, config, draft_config, start, dtype)


def node_profile(hardware: str, model: dict[str, Any] | str) -> Profile:
    """The default profile on this hardware and model (a shipped name or built data)."""
    from engines.sim.profile import load_profile

    if isinstance(model, str):
        return load_profile("default", hardware, model)
    data = json.loads((PROFILE_DIR / "default.json").read_text())
    data.update(name=f"default-on-{model['name']}", model=model, hardware=hardware)
    data.pop("calibration", None)
    return profile_of(data)


def profile_of(data: Mapping[str, Any]) -> Profile:
    """A profile from its JSON content, checked as load_profile checks a file."""
    import tempfile

    from engines.sim.profile import load_profile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.json"
        path.write_text(json.dumps(data))
        return load_profile(str(path))
