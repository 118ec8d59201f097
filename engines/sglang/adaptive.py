"""Speculation switched off above a batch size, as SGLang's adaptive speculative config.

A variant says `speculative_disable_above_batch: N`; the server gets `--speculative-adaptive
--speculative-adaptive-config <file>` whose tiers hold the variant's `speculative_num_steps`
up to batch N and `[0]` (no drafting) above it.

The file format is SGLang's own, read by `_load_adaptive_config` in
`python/sglang/srt/speculative/adaptive_spec_params.py` (sglang 0.5.11 .. 0.5.23 checked):

    {
      "1":  {"candidate_steps": [3]},
      "17": {"candidate_steps": [0]}
    }

- A JSON object. Every key made of digits is a batch-size tier: the tier applies from that
  batch size up to the next tier's key (a lower bound). Keys that are not digits are global
  tuning knobs merged into every tier (`ema_alpha` 0.2, `update_interval` 5,
  `warmup_batches` 10, `up_hysteresis` 0.0, `down_hysteresis` -0.25, `ceiling_coeff` 0; a tier
  may override each); at least one tier is required.
- `candidate_steps`: a non-empty list of non-negative ints, the `speculative_num_steps`
  values SGLang may switch between in that tier (by an EMA of the accepted draft length).
  `0` means no drafting; SGLang accepts it from 0.5.14 (0.5.11-0.5.13 demand positive ints).
- Routing (`AdaptiveSpeculativeParams._route`): the running batch size is first padded up to
  the next captured CUDA-graph batch size (unchanged past the largest), then the tier is the
  largest key <= that size; a size below every key uses the smallest key.
- A tier starts at the server's `--speculative-num-steps` if that is one of its candidates,
  else at `candidates[len(candidates) // 2]` (sorted, deduplicated); a single-candidate tier
  never moves. `--speculative-num-steps` must be in the union of all tiers' candidates
  (SGLang raises otherwise). Adaptive needs `--speculative-algorithm` EAGLE or EAGLE3 and
  `--speculative-eagle-topk` 1 (or unset); otherwise SGLang silently drops adaptive.

What a threshold N does under the padding (N between two captured sizes drafts only up to the
lower one; a zero-step tier still runs a 1-token verify): docs/simulator.md "Threshold
semantics" and docs/engines.md. `steps_for_batch` reads any config of this format and is what
the simulator uses to decide how many draft steps a batch gets.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from engines.sglang.versions import ZERO_STEP_SINCE, at_least
from engines.validation import FlagError

ADAPTIVE_ALGORITHMS: tuple[str, ...] = ("EAGLE", "EAGLE3")
"""Speculative algorithms SGLang's adaptive mode supports."""

ConfigLike = Mapping[Any, Any] | str | os.PathLike[str]

DEFAULT_ADAPTIVE_CONFIG: dict[str, Any] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
}
"""SGLang 0.5.23's built-in config (adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG), used when
--speculative-adaptive-config is absent."""


def threshold_config(num_steps: int, disable_above_batch: int) -> dict[str, dict[str, list[int]]]:
    """SGLang adaptive config that drafts `num_steps` for batch sizes <= `disable_above_batch`
    and nothing above: `{"1": {"candidate_steps": [num_steps]},
    str(N + 1): {"candidate_steps": [0]}}`. Both arguments must be ints >= 1."""
    for name, value in (("speculative_num_steps", num_steps),
                        ("speculative_disable_above_batch", disable_above_batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise FlagError(f"{name} must be an int >= 1 for a threshold config, got {value!r}",
                            field=name)
    return {
        "1": {"candidate_steps": [num_steps]},
        str(disable_above_batch + 1): {"candidate_steps": [0]},
    }


def load_tiers(config: ConfigLike) -> dict[int, list[int]]:
    """Tier lower bound -> sorted unique candidate steps, validated as SGLang validates.
    `config` is a mapping (str or int keys) or the path of a JSON file. Raises ValueError."""
    if not isinstance(config, Mapping):
        with open(config, encoding="utf-8") as f:
            config = json.load(f)
        if not isinstance(config, Mapping):
            raise ValueError(
                f"adaptive config must be a JSON object, got {type(config).__name__}")
    tiers: dict[int, list[int]] = {}
    for key, entry in config.items():
        if isinstance(key, bool) or not (isinstance(key, int) or str(key).isdigit()):
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, Mapping) else None
        if (
            isinstance(steps, str | bytes)
            or not isinstance(steps, Sequence)
            or not steps
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
        ):
            raise ValueError(
                f"adaptive config tier {key}: candidate_steps must be a non-empty list of "
                f"non-negative ints, got {steps!r}")
        tiers[int(key)] = sorted(set(steps))
    if not tiers:
        raise ValueError(
            "adaptive config has no batch-size tier (integer-string keys such as "
            f'{{"1": {{"candidate_steps": [1, 3]}}}}); keys: {list(config)}')
    return tiers


def candidate_steps(config: ConfigLike) -> list[int]:
    """Union of all tiers' candidates; `--speculative-num-steps` must be one of them."""
    return sorted({s for steps in load_tiers(config).values() for s in steps})


def route(keys: Sequence[int], batch: int, cuda_graph_bs: Sequence[int] | None) -> int:
    """The tier key for `batch`: pad it to the next size in `cuda_graph_bs` (unchanged past the
    largest), then the largest of `keys` <= it (the smallest key if none). Both sequences must
    be sorted ascending, so a caller on a hot path (the simulator, every step) sorts once."""
    size = int(batch)
    if cuda_graph_bs:
        i = bisect.bisect_left(cuda_graph_bs, size)
        if i < len(cuda_graph_bs):
            size = cuda_graph_bs[i]
    return keys[max(0, bisect.bisect_right(keys, size) - 1)]


def _route_unsorted(tiers: Mapping[int, list[int]], batch: int,
                    cuda_graph_bs: Sequence[int] | None) -> int:
    graphs = sorted(int(b) for b in cuda_graph_bs) if cuda_graph_bs else None
    return route(sorted(tiers), batch, graphs)


def steps_for_batch(
    config: ConfigLike,
    batch: int,
    *,
    initial_steps: int | None = None,
    cuda_graph_bs: Sequence[int] | None = None,
) -> int:
    """Draft steps a running batch of `batch` requests gets under `config` (mapping or JSON
    path, SGLang's format), as SGLang starts out: the routed tier's single candidate; with
    several candidates, `initial_steps` if it is one of them, else the middle candidate
    (`candidates[len // 2]`), as `AdaptiveStepSlot.__init__` does. 0 = no drafting.
    SGLang moves multi-candidate tiers at run time by acceptance; this function does not."""
    tiers = load_tiers(config)
    steps = tiers[_route_unsorted(tiers, batch, cuda_graph_bs)]
    if initial_steps in steps:
        return int(initial_steps)  # type: ignore[arg-type]
    return steps[len(steps) // 2]


# SGLang 0.5.23 python/sglang/srt/arg_groups/memory_hook.py `_handle_gpu_memory_settings`:
# the default decode max_bs by GPU memory (MiB thresholds) and tp_size.
_MAX_BS_BY_MEMORY: tuple[tuple[float, int, int], ...] = (
    (20 * 1024, 8, 8),  # T4, 4080
    (35 * 1024, 48, 160),  # A10, 4090, 5090
    (60 * 1024, 32, 160),  # A100 40GB, L40
    (90 * 1024, 256, 512),  # H100, A100 80GB
    (160 * 1024, 256, 512),  # H20, H200, RTX PRO 6000
)


def default_decode_max_bs(gpu_memory_mib: float | None, tp_size: int,
                          max_running_requests: int | None) -> int:
    """SGLang 0.5.23's default `cuda_graph_max_bs_decode` when the flag is not given
    (memory_hook.py `_handle_gpu_memory_settings`): by GPU memory and tp_size (160 when the
    memory is unknown, 512 from 160 GiB), then lowered to max_running_requests if that is
    set and smaller."""
    if gpu_memory_mib is None:
        max_bs = 160
    else:
        max_bs = 512
        for limit, small_tp, large_tp in _MAX_BS_BY_MEMORY:
            if gpu_memory_mib < limit:
                max_bs = small_tp if tp_size < 4 else large_tp
                break
    if max_running_requests is not None and max_bs > max_running_requests:
        max_bs = max_running_requests
    return max_bs


def decode_capture_sizes(max_bs: int, *, speculative: bool,
                         disable_padding: bool = False) -> list[int]:
    """The decode batch sizes SGLang captures CUDA graphs for, i.e. the sizes a running batch
    is padded up to (and that adaptive routing pads to). SGLang 0.5.23
    python/sglang/srt/arg_groups/cuda_graph_hook.py `generate_decode_cuda_graph_batch_sizes`:
    --disable-cuda-graph-padding: 1..max_bs; no speculation: 1, 2, 4, 8, 12, 16..256 step 8,
    272..496 step 16, 512.. step 32; speculation ("less padding for smaller batch sizes"):
    1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, 272.. step 16; all cut at max_bs, and
    max_bs itself appended when missing."""
    if disable_padding:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = ([1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16))
                 + list(range(512, max_bs + 1, 32)))
    else:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4))
                 + list(range(72, 257, 8)) + list(range(272, max_bs + 1, 16)))
    sizes = [b for b in sizes if b <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def effective_tiers(config: Mapping[str, Any], capture_sizes: Sequence[int],
                    initial_steps: int) -> list[tuple[int, int | None, int]]:
    """What SGLang does with `config` for a server padding to `capture_sizes`: (first batch,
    last batch or None = and above, starting depth) ranges, from SGLang's routing
    (`steps_for_batch`); past the largest captured size a batch is not padded, so the
    last range holds for every larger batch."""
    graphs = sorted(capture_sizes)
    keys = sorted(load_tiers(config))
    top = max([*graphs, keys[-1]]) + 1
    depths = [steps_for_batch(config, b, initial_steps=initial_steps, cuda_graph_bs=graphs)
              for b in range(1, top + 1)]
    out: list[tuple[int, int | None, int]] = []
    for b, d in enumerate(depths, start=1):
        if out and out[-1][2] == d:
            out[-1] = (out[-1][0], b, d)
        else:
            out.append((b, b, d))
    lo, _, d = out[-1]
    out[-1] = (lo, None, d)
    return out


def threshold_ranges(num_steps: int, disable_above_batch: int,
                     capture_sizes: Sequence[int]) -> tuple[list[tuple[int, int]], str | None]:
    """Running-batch ranges in which SGLang drafts under a threshold config, and a warning
    when the threshold falls between captured sizes (so SGLang switches speculation off
    earlier than asked). Ranges are inclusive (lo, hi); the last one may end at the largest
    captured size (larger batches are not padded and route by their own size)."""
    graphs = sorted(capture_sizes)
    routed = effective_tiers(threshold_config(num_steps, disable_above_batch), graphs, num_steps)
    ranges = [(lo, hi) for lo, hi, d in routed if d and hi is not None]
    last = ranges[-1][1] if ranges else 0
    warning = None
    if last != disable_above_batch:
        below = max((g for g in graphs if g <= disable_above_batch), default=None)
        above = min((g for g in graphs if g > disable_above_batch), default=None)
        warning = (f"speculative_disable_above_batch={disable_above_batch} falls between the "
                   f"captured CUDA-graph batch sizes {below} and {above}: SGLang drafts only "
                   f"up to batch {last} (batch {last + 1} pads to {above} and routes to the "
                   "no-drafting tier)")
    return ranges, warning


def honoured_thresholds(args: Mapping[str, Any], gpu_memory_mib: float | None = None
                        ) -> list[int]:
    """The thresholds SGLang tells apart for a variant (ascending, below its running cap):
    a threshold between two captured sizes drafts only up to the lower one
    (`threshold_ranges`), so up to the decode capture list's max_bs the distinct values are
    the captured sizes (`capture_sizes`); past it a batch is not padded and every integer
    counts. FlagError for a variant SGLang cannot switch off by batch size."""
    check_threshold_args(args, 1, None)
    cap = args.get("max_running_requests")
    cap = cap if isinstance(cap, int) and cap >= 1 else 48
    sizes = capture_sizes(args, gpu_memory_mib)
    max_bs = sizes[-1]
    return [n for n in sorted(set(sizes) | set(range(max_bs + 1, cap))) if n < cap]


def threshold_notes(variant_name: str, variant: Mapping[str, Any]) -> list[str]:
    """Plan lines for a variant with `speculative_disable_above_batch` (grid/plan/build.py prints
    them with its warnings): where SGLang drafts on an unknown GPU (`capture_sizes`), and a
    warning when the threshold falls between captured sizes."""
    n = variant.get("speculative_disable_above_batch")
    args = variant.get("args") or {}
    steps = args.get("speculative_num_steps")
    if n is None or not isinstance(steps, int) or not isinstance(n, int) or n < 1 or steps < 1:
        return []
    sizes = capture_sizes(args)
    ranges, warning = threshold_ranges(steps, n, sizes)
    text = ", ".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in ranges) or "none"
    return [f"{variant_name}: drafts {steps} steps at running batch {text}; no drafting above "
            f"(speculative CUDA-graph sizes up to {sizes[-1]})"] + (
                [f"{variant_name}: {warning}"] if warning else [])


def config_json(config: Mapping[str, Any]) -> str:
    """Canonical JSON text (sorted keys, compact): identical configs give identical text."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def check_threshold_args(
    args: Mapping[str, Any], disable_above_batch: int, version: str | None
) -> int:
    """Check that a variant can run with speculation off above a batch size; return its
    `speculative_num_steps`. FlagError (naming the field and version) unless: EAGLE/EAGLE3,
    eagle_topk 1 or unset, num_steps explicit and >= 1, no adaptive flags of its own, and an
    SGLang version that accepts step 0 (0.5.14+; None = unknown passes)."""
    check_eagle_chain(args, f"speculative_disable_above_batch={disable_above_batch}", version)
    steps = args.get("speculative_num_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise FlagError(
            "speculative_disable_above_batch needs an explicit speculative_num_steps >= 1, "
            f"got {steps!r}", field="speculative_num_steps", version=version)
    if at_least(version, ZERO_STEP_SINCE) is False:
        raise FlagError(
            f"speculative_disable_above_batch: SGLang {version} cannot switch speculation off "
            f"by batch size (adaptive step 0 arrived in {ZERO_STEP_SINCE})",
            field="speculative_disable_above_batch", version=version)
    threshold_config(steps, disable_above_batch)  # validates the threshold itself
    return steps


OWN_FLAGS = ("speculative_adaptive", "speculative_adaptive_config")
"""Variant args a schedule, a threshold or specgrid's adaptive setting writes itself."""


def check_eagle_chain(args: Mapping[str, Any], what: str, version: str | None) -> None:
    """EAGLE/EAGLE3 with topk 1 (or unset), and no adaptive flags of the variant's own: what
    SGLang needs to honour an adaptive config instead of dropping it."""
    algo = args.get("speculative_algorithm")
    if algo not in ADAPTIVE_ALGORITHMS:
        raise FlagError(f"{what} needs speculative_algorithm EAGLE or EAGLE3 (SGLang runs "
                        f"adaptive speculation only there, and drops it silently otherwise), "
                        f"got {algo!r}", field="speculative_algorithm", version=version)
    topk = args.get("speculative_eagle_topk")
    if topk is not None and topk != 1:
        raise FlagError(f"{what} needs speculative_eagle_topk 1 (SGLang drops adaptive "
                        f"speculation silently for a tree), got {topk!r}",
                        field="speculative_eagle_topk", version=version)
    for own in OWN_FLAGS:
        if args.get(own) not in (None, False):
            raise FlagError(f"{own} is set by {what}; do not give both (use the variant's "
                            "speculative_adaptive / speculative_adaptive_config keys)",
                            field=own, version=version)


def capture_sizes(args: Mapping[str, Any], gpu_memory_mib: float | None = None) -> list[int]:
    """The speculative decode capture list a server of `args` pads to: max_bs from the args'
    cuda_graph_max_bs(_decode), else SGLang's default for the GPU's memory (160 unknown),
    lowered to max_running_requests."""
    explicit = args.get("cuda_graph_max_bs_decode", args.get("cuda_graph_max_bs"))
    running = args.get("max_running_requests")
    tp_arg = args.get("tp_size")
    tp = tp_arg if isinstance(tp_arg, int) else 1
    max_bs = int(explicit) if explicit is not None else default_decode_max_bs(
        gpu_memory_mib, tp, running if isinstance(running, int) and running >= 1 else 48)
    return decode_capture_sizes(max_bs, speculative=True)
