"""The simulator behind the engine interface (engines/base.py): `python -m engines.sim` with the
same SGLang flags a real server would get (spelled as given: it has no version), plus its
`--sim-*` flags; SGLang's metric names, endpoints and plan warnings (it stands in for SGLang)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from engines.base import SGLANG_METRICS, Engine, MeasuredCell, ServerRequest
from engines.launch import Endpoints, LaunchSpec
from engines.sglang.adaptive import honoured_thresholds
from engines.sglang.command import build_sim_launch, speculation_on
from engines.sglang.engine import sglang_warnings
from engines.sim.profile import gpu_memory_gib, twin_of


class Sim(Engine):
    name = "sim"
    label = "simulated SGLang"
    simulated = True
    start_estimate_s = 4.0
    endpoints = Endpoints()
    metrics = SGLANG_METRICS

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        sim_args = dict(request.options.get("sim_args") or {})
        profile = str(sim_args.get("profile") or "")
        if profile.endswith(".json") or "/" in profile:  # a file: the server's cwd may differ
            sim_args["profile"] = str(Path(profile).resolve())
        spec = build_sim_launch(
            args=request.args, env=request.env, model_path=request.model_path,
            draft_model_path=request.draft_model_path,
            served_model_name=request.served_model_name, tp_size=request.tp_size,
            python=request.python, ready_timeout_s=request.ready_timeout_s,
            disable_above_batch=request.disable_above_batch,
            sim_args=sim_args, host=request.host,
            api_key=request.api_key, stop_timeout_s=request.stop_timeout_s,
            revision=request.revision, draft_revision=request.draft_revision)
        return replace(spec, endpoints=self.endpoints)

    def gpus(self, tp_size: int, device: str) -> int:
        """The simulator models GPUs it does not use: it reserves the logical GPUs of its
        placement, so parallel server groups pack as they would on a real node."""
        return tp_size

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        return sglang_warnings(variant, concurrencies)

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """As SGLang's (the simulator routes batches the same way, engines/sim/core.py), with
        the max_bs SGLang would pick for the modelled GPU's memory."""
        args = variant.get("args") or {}
        if not speculation_on(args):
            return None
        memory = gpu_memory_gib(hardware) if hardware else None
        return honoured_thresholds(args, None if memory is None else memory * 1024)

    def provenance(self, options: Mapping[str, Any]) -> str | None:
        """``twin of RUN`` when the profile (``sim_args.profile``) is a twin (docs/twin.md)."""
        run = twin_of(str((options.get("sim_args") or {}).get("profile") or "default"))
        return f"twin of {run}" if run else None

    def fit_twin(self, cells: Sequence[MeasuredCell], *, run_id: str,
                 hardware: str | None = None, model: str | None = None,
                 start: str | None = None, seed: int = 0, replicates: int = 20
                 ) -> dict[str, Any]:
        from engines.sim.twin.document import build  # scipy: only when fitting

        return build(cells, run_id=run_id, hardware=hardware, model=model, start=start,
                     seed=seed, replicates=replicates)


ENGINE = Sim()
