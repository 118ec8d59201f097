"""A speculative depth schedule, and SGLang's own runtime adaptation, as SGLang 0.5.23 runs them
(the simulator runs the same files the same way: engines/sim/adaptive.py); docs/engines.md "A
speculative depth by batch size" and "SGLang's own runtime adaptation".

A schedule (`engines.depth.DepthTiers`) becomes an adaptive config with ONE candidate per tier
(`schedule_config`), so the depth is pinned per tier and the adaptive controller only routes;
`adaptive.effective_tiers` says what SGLang's routing (padding to the speculative capture
list) does with it, and the plan prints that (`depth_notes`). `speculative_adaptive` is
SGLang's own EMA-driven adaptation, refused in the plan where SGLang would drop it silently
(`check_adaptive_args`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from engines.depth import DepthTiers, depth_schedule
from engines.sglang import adaptive
from engines.sglang.adaptive import DEFAULT_ADAPTIVE_CONFIG
from engines.sglang.versions import ZERO_STEP_SINCE, at_least
from engines.validation import FlagError


def schedule_config(tiers: DepthTiers) -> dict[str, dict[str, list[int]]]:
    """SGLang's adaptive config pinning each tier's depth: one candidate per tier."""
    return {str(start): {"candidate_steps": [depth]} for start, depth in depth_schedule(tiers)}


def check_schedule_args(args: Mapping[str, Any], tiers: DepthTiers, version: str | None
                        ) -> int:
    """Check that a variant can run the schedule; return its largest depth (the server's
    --speculative-num-steps). FlagError naming the field and version otherwise."""
    tiers = depth_schedule(tiers)
    adaptive.check_eagle_chain(args, "speculative_depth", version)
    if any(d == 0 for _, d in tiers) and at_least(version, ZERO_STEP_SINCE) is False:
        raise FlagError(f"speculative_depth: a depth-0 tier needs SGLang {ZERO_STEP_SINCE}+ "
                        f"(adaptive step 0), got {version}", field="speculative_depth",
                        version=version)
    return max(d for _, d in tiers)


def schedule_file(args: Mapping[str, Any], tiers: DepthTiers, version: str | None
                  ) -> tuple[str, str]:
    """(file name, JSON text) of the schedule's adaptive config; the name is content-addressed
    (`adaptive-<sha256[:16]>.json`, as a threshold's)."""
    check_schedule_args(args, tiers, version)
    return config_file(schedule_config(tiers))


def read_config(path: str) -> dict[str, Any]:
    """An adaptive config file (variant.speculative_adaptive_config), validated as SGLang's
    loader does; ValueError with one line naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        adaptive.load_tiers(config)
    except (OSError, ValueError) as e:
        raise ValueError(f"speculative_adaptive_config {path}: {e}") from None
    return dict(config)


def config_file(config: Mapping[str, Any]) -> tuple[str, str]:
    """(content-addressed file name, JSON text) of an adaptive config (validated)."""
    adaptive.load_tiers(config)
    text = adaptive.config_json(config) + "\n"
    return f"adaptive-{hashlib.sha256(text.rstrip().encode()).hexdigest()[:16]}.json", text


def schedule_args(args: Mapping[str, Any], tiers: DepthTiers, version: str | None,
                  path: str) -> dict[str, Any]:
    """`args` with the schedule's flags: adaptive on, its config at `path`, num_steps = the
    largest depth and num_draft_tokens = that + 1."""
    top = check_schedule_args(args, tiers, version)
    return {**args, "speculative_num_steps": top, "speculative_num_draft_tokens": top + 1,
            "speculative_adaptive": True, "speculative_adaptive_config": path}


def check_adaptive_args(args: Mapping[str, Any], config: Mapping[str, Any] | None,
                        version: str | None) -> None:
    """A variant that asks for SGLang's runtime adaptation: EAGLE/EAGLE3, topk 1, and its
    speculative_num_steps (if set) among the candidates of `config` (SGLang's default tiers
    when None), as SGLang checks at start-up."""
    adaptive.check_eagle_chain(args, "speculative_adaptive", version)
    union = adaptive.candidate_steps(config if config is not None else DEFAULT_ADAPTIVE_CONFIG)
    steps = args.get("speculative_num_steps")
    if steps is not None and steps not in union:
        raise FlagError(f"speculative_adaptive: speculative_num_steps={steps} is not among the "
                        f"adaptive config's candidate_steps {union} (SGLang refuses to start)",
                        field="speculative_num_steps", version=version)


def tiers_text(tiers: Sequence[tuple[int, int | None, int]]) -> str:
    """`1-8: 5, 9-32: 3, 33+: 0`."""
    def span(lo: int, hi: int | None) -> str:
        return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}-{hi}")
    return ", ".join(f"{span(lo, hi)}: {d}" for lo, hi, d in tiers)


def depth_notes(name: str, variant: Mapping[str, Any], gpu_memory_mib: float | None = None
                ) -> list[str]:
    """Plan lines for a variant with a speculative_depth schedule: the depth SGLang gives each
    running batch, and a warning for each tier whose start moves with the padding."""
    raw = variant.get("speculative_depth")
    if variant.get("speculative_adaptive") and not raw:
        path = variant.get("speculative_adaptive_config")
        try:
            candidates = adaptive.load_tiers(read_config(path) if path else DEFAULT_ADAPTIVE_CONFIG)
        except ValueError:
            return []  # the launch spec reports it
        text = ", ".join(f"{b}+: {{{', '.join(map(str, c))}}}"
                         for b, c in sorted(candidates.items()))
        return [f"{name}: SGLang adapts the speculative depth at run time by an EMA of "
                f"accepted drafts, among the candidates of each tier ({path or 'its default'}):"
                f" {text}"]
    if not raw:
        return []
    try:
        tiers = depth_schedule(raw)
    except ValueError:
        return []  # the launch spec reports it
    args = variant.get("args") or {}
    graphs = adaptive.capture_sizes(args, gpu_memory_mib)
    routed = adaptive.effective_tiers(schedule_config(tiers), graphs, max(d for _, d in tiers))
    out = [f"{name}: speculative depth by running batch as SGLang routes it: "
           f"{tiers_text(routed)} (speculative CUDA-graph sizes up to {graphs[-1]})"]
    starts = {lo for lo, _, _ in routed}
    for start, depth in tiers[1:]:
        if start not in starts:
            moved = max((lo for lo, _, d in routed if lo <= start and d == depth), default=None)
            where = "is never used" if moved is None else f"starts at batch {moved}"
            out.append(f"{name}: speculative_depth tier from batch {start} {where}: SGLang pads "
                       "a running batch to its captured CUDA-graph size before it picks the "
                       "tier")
    return out
