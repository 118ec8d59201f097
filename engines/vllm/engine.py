"""vLLM behind the engine interface (engines/base.py): command lines (engines/vllm/command.py),
vLLM's own parser (engines/vllm/validate.py), start-up log phases, the metric names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engines.base import Engine
from engines.depth import DepthSetting, depth_schedule
from engines.launch import Endpoints, LaunchSpec, ServerRequest
from engines.metrics import VLLM_METRICS
from engines.validation import FlagProblem
from engines.vllm import validate
from engines.vllm.command import (
    batch_ranges,
    build_vllm_launch,
    schedule_setting,
    threshold_schedule,
)


class VLLM(Engine):
    name = "vllm"
    label = "vLLM"
    endpoints = Endpoints(flush_cache="/reset_prefix_cache", server_info="/server_info",
                          native_generate=False)
    metrics = VLLM_METRICS

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        return build_vllm_launch(request)

    def detect_version(self, python: str) -> str | None:
        return validate.vllm_available(python)

    def validate(self, argvs: Mapping[str, Sequence[str]], python: str
                 ) -> tuple[str, bool, list[FlagProblem]]:
        return validate.check_batch(argvs, python)

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        """Concurrencies above max_num_seqs queue in the server; a threshold at or above it
        never switches speculation off; and how vLLM's schedule reads (command.py)."""
        name, args = variant["name"], variant.get("args") or {}
        mrr, n = args.get("max_running_requests"), variant.get("speculative_disable_above_batch")
        out = []
        if isinstance(mrr, int):
            out += [f"{name}: concurrency {c} exceeds max_num_seqs {mrr}: {c - mrr} requests "
                    "wait in the server queue (TTFT includes queueing)"
                    for c in sorted(set(concurrencies)) if c > mrr]
            if isinstance(n, int):
                k = int(args.get("speculative_num_steps") or 1)
                out.append(f"{name}: speculation off above batch {n}: vLLM's schedule "
                           f"{threshold_schedule(n, k, mrr)} (batch = requests scheduled in "
                           "a step)" if n < mrr else
                           f"{name}: speculative_disable_above_batch {n} >= max_num_seqs {mrr}"
                           ": speculation is never switched off")
            raw = variant.get("speculative_depth")
            try:
                tiers = depth_schedule(raw) if raw else None
            except ValueError:
                tiers = None  # the launch spec reports it
            if tiers:
                out.append(f"{name}: speculative depth by scheduled batch: vLLM's schedule "
                           f"{batch_ranges(tiers, mrr)}, num_speculative_tokens "
                           f"{max(d for _, d in tiers)}")
        return out

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """Every batch size below max_num_seqs: vLLM looks the draft count up by the number of
        requests scheduled in a step, unpadded (command.py `threshold_schedule`)."""
        args = variant.get("args") or {}
        cap = args.get("max_running_requests")
        algo = str(args.get("speculative_algorithm") or "").upper()
        if algo in ("", "NONE") or not isinstance(cap, int) or cap < 2:
            return None
        return list(range(1, cap))

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """`num_speculative_tokens_per_batch_size` in the --speculative-config JSON
        (command.py `batch_ranges`), looked up by the number of scheduled requests."""
        return schedule_setting(request)


ENGINE = VLLM()
